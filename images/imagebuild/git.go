package imagebuild

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Provenance is what a build records about its sources.
type Provenance struct {
	Revision string
	Version  string
	Created  time.Time
}

// GitProvenance reads the commit, a version and a timestamp from the
// checkout at dir. The timestamp is SOURCE_DATE_EPOCH when set (the
// reproducible-builds convention), else the commit time: the same commit
// then gives the same image digest whoever builds it and whenever. A dirty
// tree gets a "-dirty" version, since its binaries are not the commit's.
func GitProvenance(dir string) (Provenance, error) {
	var p Provenance
	var err error
	if p.Revision, err = git(dir, "rev-parse", "HEAD"); err != nil {
		return p, err
	}
	if p.Version, err = git(dir, "describe", "--tags", "--always", "--dirty"); err != nil {
		return p, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git(dir, "log", "-1", "--format=%ct"); err != nil {
			return p, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return p, fmt.Errorf("bad SOURCE_DATE_EPOCH or commit time %q: %w", epoch, err)
	}
	p.Created = time.Unix(secs, 0).UTC()
	return p, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
