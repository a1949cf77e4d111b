//go:build linux

package bwrap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/sandbox"
)

// cgroupRoot is where cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// limitCgroup is a cgroup v1 child made for one sandboxed command, in the
// pids, memory and cpu hierarchies its limits need. The thread that starts
// the command joins it first (v1 moves single threads through "tasks"),
// so the command is inside from its first instruction: a fork bomb cannot
// race the move.
type limitCgroup struct {
	limits sandbox.Limits
	dirs   map[string]string // controller → our child cgroup
	bases  map[string]string // controller → the cgroup we came from
}

// LimitsMechanism says how an isolating backend enforces [sandbox.Limits] here,
// and what it cannot enforce, for doctor and the result's info.
func LimitsMechanism() (mechanism string, unenforced string) {
	if _, err := cgroupV1Bases(); err != nil {
		return "none", "memory, cpus, pids under bwrap: " + err.Error()
	}
	return "cgroup v1 (pids, memory, cpu)", ""
}

// cgroupV1Bases finds this process's cgroup in the v1 pids, memory and cpu
// hierarchies, when gatebridge may create children there.
func cgroupV1Bases() (map[string]string, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs gatebridge to run as root (or a delegated cgroup, not supported yet)")
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Join(cgroupRoot, "pids"), &fs); err != nil || fs.Type != unix.CGROUP_SUPER_MAGIC {
		if unix.Statfs(cgroupRoot, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			return nil, errors.New("cgroup v2 is not supported yet")
		}
		return nil, errors.New("no cgroup v1 pids hierarchy at " + cgroupRoot + "/pids")
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bases := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			switch ctrl {
			case "pids", "memory", "cpu":
				dir := filepath.Join(cgroupRoot, ctrl, parts[2])
				if _, err := os.Stat(filepath.Join(dir, "tasks")); err == nil {
					bases[ctrl] = dir
				}
			}
		}
	}
	if bases["pids"] == "" || bases["memory"] == "" {
		return nil, errors.New("the v1 pids and memory hierarchies are not both mounted")
	}
	return bases, nil
}

// newLimitCgroup creates the cgroup for l (nil, nil when l sets nothing).
func newLimitCgroup(l sandbox.Limits) (*limitCgroup, error) {
	if l.Memory <= 0 && l.Pids <= 0 && l.CPUs <= 0 {
		return nil, nil
	}
	bases, err := cgroupV1Bases()
	if err != nil {
		return nil, &noCgroupError{err}
	}
	pruneOnce.Do(func() { pruneCgroups(bases) })
	var b [8]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("gatebridge-%d-%x", os.Getpid(), b)
	cg := &limitCgroup{limits: l, dirs: map[string]string{}, bases: map[string]string{}}
	set := func(ctrl string, files ...[2]string) error {
		base, ok := bases[ctrl]
		if !ok {
			return fmt.Errorf("no cgroup v1 %s hierarchy", ctrl)
		}
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		cg.dirs[ctrl], cg.bases[ctrl] = dir, base
		for _, kv := range files {
			p := filepath.Join(dir, kv[0])
			if _, err := os.Stat(p); err != nil && kv[0] == "memory.memsw.limit_in_bytes" {
				continue // no swap accounting: memory.limit_in_bytes alone
			}
			if err := os.WriteFile(p, []byte(kv[1]), 0); err != nil {
				return fmt.Errorf("set %s: %w", kv[0], err)
			}
		}
		return nil
	}
	if l.Pids > 0 {
		err = set("pids", [2]string{"pids.max", strconv.FormatInt(l.Pids, 10)})
	}
	if err == nil && l.Memory > 0 {
		m := strconv.FormatInt(l.Memory, 10)
		err = set("memory", [2]string{"memory.limit_in_bytes", m}, [2]string{"memory.memsw.limit_in_bytes", m})
	}
	if err == nil && l.CPUs > 0 {
		err = set("cpu", [2]string{"cpu.cfs_period_us", "100000"},
			[2]string{"cpu.cfs_quota_us", strconv.FormatInt(int64(l.CPUs*100000), 10)})
	}
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("cgroup limits: %w", err)
	}
	return cg, nil
}

// enter moves the calling thread into the cgroup.
func (cg *limitCgroup) enter() error {
	tid := strconv.Itoa(unix.Gettid())
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte(tid), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// adopt moves process pid, every thread of it, into the cgroup.
func (cg *limitCgroup) adopt(pid int) error {
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("move %d into cgroup %s: %w", pid, dir, err)
		}
	}
	return nil
}

// leave moves the calling thread back.
func (cg *limitCgroup) leave() {
	tid := strconv.Itoa(unix.Gettid())
	for ctrl := range cg.dirs {
		os.WriteFile(filepath.Join(cg.bases[ctrl], "tasks"), []byte(tid), 0)
	}
}

// report says which limit stopped the command, if one did.
func (cg *limitCgroup) report() string {
	var msgs []string
	if dir, ok := cg.dirs["memory"]; ok {
		if b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if n, ok := strings.CutPrefix(line, "oom_kill "); ok && n != "0" {
					msgs = append(msgs, fmt.Sprintf("was killed by the memory limit (sandbox.limits.memory=%d bytes; %s process(es) killed)", cg.limits.Memory, n))
				}
			}
		}
	}
	if dir, ok := cg.dirs["pids"]; ok {
		if b, err := os.ReadFile(filepath.Join(dir, "pids.events")); err == nil {
			if n, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "max "); ok && n != "0" {
				msgs = append(msgs, fmt.Sprintf("hit the process limit (sandbox.limits.pids=%d; %s fork(s) refused)", cg.limits.Pids, n))
			}
		}
	}
	return strings.Join(msgs, "; ")
}

// remove deletes the cgroup once its processes are gone.
func (cg *limitCgroup) remove() {
	for _, dir := range cg.dirs {
		for i := 0; i < 50; i++ {
			if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

var pruneOnce sync.Once

// pruneCgroups removes the limit cgroups (gatebridge-<pid>-<random>) under
// bases that a gatebridge killed before it could clean up left behind:
// those whose pid is gone and that hold no process (rmdir refuses a cgroup
// with tasks, so a live one is never touched). It returns what it removed.
// Every gatebridge that makes a limit cgroup runs it once first.
func pruneCgroups(bases map[string]string) (removed []string) {
	for _, base := range bases {
		m, _ := filepath.Glob(filepath.Join(base, "gatebridge-*-*"))
		for _, dir := range m {
			f := strings.SplitN(filepath.Base(dir), "-", 3)
			pid, err := strconv.Atoi(f[1])
			if err != nil || pid == os.Getpid() {
				continue
			}
			if _, err := os.Stat("/proc/" + f[1]); err == nil {
				continue // that gatebridge still runs
			}
			if unix.Rmdir(dir) == nil {
				removed = append(removed, dir)
			}
		}
	}
	return removed
}

// PruneCgroups removes the limit cgroups that gatebridge processes killed
// before they could clean up left behind (see pruneCgroups), for
// `gatebridge prune`. It returns the cgroup directories removed.
func PruneCgroups() []string {
	bases, err := cgroupV1Bases()
	if err != nil {
		return nil
	}
	return pruneCgroups(bases)
}
