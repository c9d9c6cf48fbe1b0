package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU returns the CPU time (user and system) each control-plane process and
// the main manager have used so far, by name. A benchmark takes it before
// and after a run to tell which process the run's time was spent in.
func (s *Sandbox) CPU() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	procs := []*proc{s.manager}
	if s.cp != nil {
		procs = append(procs, s.cp.etcd, s.cp.apiserver, s.cp.kcm)
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		d, err := procCPU(p.Pid())
		if err != nil {
			return nil, err
		}
		out[p.name] = d
	}
	return out, nil
}

// CPU returns the CPU time the instance has used so far.
func (i *Instance) CPU() (time.Duration, error) { return procCPU(i.p.Pid()) }

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc on every
// architecture Go supports.
const clockTicks = 100

// procCPU reads utime and stime from /proc/pid/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start past its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
