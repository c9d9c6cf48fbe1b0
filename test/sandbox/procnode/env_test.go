package procnode

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestExpandFollowsKubernetesRules(t *testing.T) {
	vars := envLookup([]envVar{{"A", "1"}, {"PATHY", "/x"}})
	for in, want := range map[string]string{
		"$(A)":           "1",
		"a$(A)b$(A)":     "a1b1",
		"$$(A)":          "$(A)", // escaped
		"$(MISSING)":     "$(MISSING)",
		"$(PATHY)/sub":   "/x/sub",
		"$HOME and $!":   "$HOME and $!", // shell syntax passes through
		"unterminated$(": "unterminated$(",
		"$$":             "$",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMountMapPrefersLongestMountAndPathBoundaries(t *testing.T) {
	m := mountMap{{"/var/run/packline/push-auth", "/l/push"}, {"/var/run", "/l/run"}, {"/workspace", "/l/ws"}}
	for in, want := range map[string]string{
		"/workspace":                              "/l/ws",
		"/workspace/a/b":                          "/l/ws/a/b",
		"/var/run/packline/push-auth":             "/l/push",
		"/var/run/packline/push-auth/config.json": "/l/push/config.json",
		"/var/run/other":                          "/l/run/other",
	} {
		if got, ok := m.resolve(in); !ok || got != want {
			t.Errorf("resolve(%q) = %q, %t; want %q", in, got, ok, want)
		}
	}
	if got, ok := m.resolve("/workspaces"); ok {
		t.Errorf("/workspaces must not match the /workspace mount, got %q", got)
	}
}

func TestWriteFilesHonoursItemsAndModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	mode := int32(0o400)
	data := map[string][]byte{".dockerconfigjson": []byte("{}"), "other": []byte("x")}
	err := writeFiles(dir, data, []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "config.json", Mode: &mode}, {Key: "other", Path: "../../escape/other"}}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o400 {
		t.Errorf("mode %v, want 0400", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, "escape", "other")); err != nil {
		t.Errorf("a path with .. must stay inside the volume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".dockerconfigjson")); !os.IsNotExist(err) {
		t.Errorf("with items, only the listed keys are written (err %v)", err)
	}
	if err := writeFiles(t.TempDir(), data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, nil, true); err != nil {
		t.Errorf("a missing key of an optional volume is skipped, got %v", err)
	}
	if err := writeFiles(dir, data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, nil, false); err == nil {
		t.Error("a missing key must fail, as the kubelet's volume setup does")
	}
}
