package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// TestSecBwrapNoNestedUserns: inside bwrap a command could create a user
// namespace of its own (`unshare -Urm`), where it holds every capability
// over its own mounts: it mounted a 1 GiB tmpfs past sandbox.limits.tmp_size
// and reached the kernel's namespaced-root attack surface. bwrap now runs
// with --disable-userns; the read-only binds stay read-only either way.
func TestSecBwrapNoNestedUserns(t *testing.T) {
	needBackend(t, "bwrap")
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) on this host for the attack")
	}
	ws := workspace(t)
	must(t, os.MkdirAll(filepath.Join(ws, ".git"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644))
	if os.Geteuid() == 0 {
		must(t, exec.Command("chown", "-R", "4321:4321", ws).Run())
	}
	cfg := "sandbox:\n  limits:\n    tmp_size: 8388608\n"
	script := `unshare -Urm true 2>/dev/null && echo USERNS
unshare -Urm sh -c 'mount -t tmpfs -o size=1g none /tmp && dd if=/dev/zero of=/tmp/f bs=1048576 count=16 2>/dev/null && echo BIGTMP' 2>/dev/null
unshare -Urm sh -c 'umount .git 2>/dev/null; mount -o remount,rw .git 2>/dev/null; echo pwned >> .git/config && echo GIT' 2>/dev/null
touch newfile && echo wrote`
	out := gb(t, "bwrap", Run{Dir: ws, Config: cfg, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
	if out.Stdout != "wrote\n" {
		t.Errorf("stdout %q (want only wrote), stderr %q", out.Stdout, out.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
}

// cgroupBase is this process's cgroup in the v1 pids hierarchy (gatebridge
// started from here makes its limit cgroups under it), or "".
func cgroupBase() string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "pids") {
			return filepath.Join("/sys/fs/cgroup/pids", f[2])
		}
	}
	return ""
}

// TestSecBwrapCrashLeavesNoCgroup: kill -9 of gatebridge left its limits
// cgroup (in every hierarchy) behind, one per crash. The next gatebridge
// that makes a limit cgroup removes those of dead gatebridges.
func TestSecBwrapCrashLeavesNoCgroup(t *testing.T) {
	needRoot(t)
	needBackend(t, "bwrap")
	base := cgroupBase()
	if base == "" {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("sandbox:\n  limits:\n    pids: 64\n    memory: 67108864\n"), 0o644))
	marker := fmt.Sprintf("%d", 5000+rand.IntN(1000000))
	cmd := exec.Command(binary, "--config", cfg, "run", "--sandbox", "bwrap", "--", "sleep", marker)
	cmd.Dir = workspace(t)
	must(t, cmd.Start())
	pattern := filepath.Join(base, fmt.Sprintf("gatebridge-%d-*", cmd.Process.Pid))
	if !sandboxtest.Poll(30*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the command did not start")
	}
	if m, _ := filepath.Glob(pattern); len(m) == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no limit cgroup %s while the command runs", pattern)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	if !sandboxtest.Poll(15*time.Second, func() bool { return len(sleepPids(marker)) == 0 }) {
		t.Fatalf("sleep %s still runs 15s after gatebridge was killed", marker)
	}
	// `gatebridge prune` removes it and says so (as the next run with
	// limits would, once per process).
	left, _ := filepath.Glob(pattern)
	out := gbRaw(t, workspace(t), nil, nil, 0, "--config", cfg, "prune")
	if out.Code != 0 || len(left) == 0 || !strings.Contains(out.Stdout, left[0]) {
		t.Errorf("prune: exit %d, stdout %q, stderr %q, left %v", out.Code, out.Stdout, out.Stderr, left)
	}
	if m, _ := filepath.Glob(pattern); len(m) != 0 {
		t.Errorf("the killed gatebridge's cgroup is still there after prune: %v", m)
	}
}

// TestSecBwrapScratchBounded: TMPDIR was bounded by tmp_size, but the
// sandbox's root and /dev (tmpfs that bwrap makes, owned by the command's
// uid) and /dev/shm took 32 MiB each with an 8 MiB tmp_size: host memory
// without a bound. The root and /dev are read-only now; /dev/shm is a
// tmpfs of tmp_size like /tmp.
func TestSecBwrapScratchBounded(t *testing.T) {
	needBackend(t, "bwrap")
	cfg := "sandbox:\n  limits:\n    tmp_size: 8388608\n"
	script := `for f in /big /dev/big /dev/shm/big /tmp/big; do
  dd if=/dev/zero of=$f bs=65536 count=512 2>/dev/null && echo "$f took 32 MiB"
  echo "$f $(cat $f 2>/dev/null | wc -c)"
done
echo x > /dev/null && echo null-ok`
	out := gb(t, "bwrap", Run{Config: cfg, Command: []string{"sh", "-c", script}})
	if strings.Contains(out.Stdout, "took") || !strings.Contains(out.Stdout, "null-ok") {
		t.Fatalf("stdout %q, stderr %q", out.Stdout, out.Stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			if n, _ := strconv.Atoi(f[1]); n > 8<<20 {
				t.Errorf("%s holds %d bytes, past tmp_size", f[0], n)
			}
		}
	}
}
