package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecDockerLeaseHeld: the docker lease is a FIFO in the session that
// gatebridge holds open for writing; the container kills the command when
// it reads EOF (gatebridge died). A hostile command that opens the lease
// for writing itself (its path is on the entry script's command line in
// /proc) never lets that EOF come and outlives a kill -9 of gatebridge.
// The lease is now readable only (0440, owned by gatebridge), so the open
// fails and the command dies with gatebridge — in a per-command container
// and in an exec of a persistent sandbox (which had no lease before: its
// command ran on after a kill -9 until the sandbox was stopped). On a
// busy host another gatebridge's start may reap the per-command container
// (dead owner) within the wait and hide the attack there; the persistent
// case has no such backstop.
func TestSecDockerLeaseHeld(t *testing.T) {
	needBackend(t, "docker")
	ws := workspace(t)
	name := randName("lease")
	if out := gbRaw(t, ws, nil, nil, 0, "sandbox", "start", name); out.Code != 0 {
		t.Fatalf("sandbox start: %s", out.Stderr)
	}
	t.Cleanup(func() { gbRaw(t, ws, nil, nil, 0, "sandbox", "stop", name) })
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"per-command", []string{"--sandbox", "docker"}},
		{"persistent", []string{"--reuse", name}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			marker := fmt.Sprintf("%d", 5000+rand.IntN(1000000))
			// Find the lease on a command line, hold a write end of it (the
			// sleep inherits it), sleep; without a lease to hold, sleep anyway.
			script := `L=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -E '^/gatebridge/.*/lease(-[0-9a-f]+)?$' | head -1)
[ -p "$L" ] || echo "no lease found" >&2
(exec 8<>"$L"; exec sleep ` + marker + `) 2>/dev/null || sleep ` + marker
			args := append([]string{"run"}, mode.args...)
			cmd := exec.Command(binary, append(args, "--", "sh", "-c", script)...)
			cmd.Dir = ws
			var se strings.Builder
			cmd.Stderr = &se
			must(t, cmd.Start())
			if !waitFor(30*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the command did not start: %s", se.String())
			}
			must(t, cmd.Process.Signal(syscall.SIGKILL))
			cmd.Wait()
			if !waitFor(15*time.Second, func() bool { return len(sleepPids(marker)) == 0 }) {
				t.Errorf("sleep %s still runs 15s after gatebridge was killed (stderr %q)", marker, se.String())
				for _, pid := range sleepPids(marker) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if strings.Contains(se.String(), "no lease found") {
				t.Errorf("the command found no lease to attack: %q", se.String())
			}
		})
	}
}

// TestSecWorkspaceGroupRoot: as root, the command runs as the workspace
// owner's uid:gid. A workspace owned by 4321:0 ran it in group 0, and in a
// writable workspace it left a setgid-root copy of sh that any host user
// could run with egid 0 (bind mounts cannot be nosuid). The group is now
// sandbox.gid (65534) when the workspace's group is root's.
func TestSecWorkspaceGroupRoot(t *testing.T) {
	needRoot(t)
	forEachIsolating(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		must(t, exec.Command("chown", "4321:0", ws).Run())
		must(t, os.Chmod(ws, 0o775))
		script := `id -g; cp /bin/sh ./sg && chmod 2755 ./sg; touch f; echo done`
		out := gb(t, backend, Run{Dir: ws, Args: []string{"--writable-workspace"}, Command: []string{"sh", "-c", script}})
		if strings.HasPrefix(out.Stdout, "0\n") || !strings.HasSuffix(out.Stdout, "done\n") {
			t.Errorf("stdout %q (want a gid other than 0, then done), stderr %q", out.Stdout, out.Stderr)
		}
		filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode()&os.ModeSetgid != 0 && st.Gid == 0 && !fi.IsDir() {
				t.Errorf("%s is setgid root on the host", p)
			}
			if p != ws && st.Gid == 0 {
				t.Errorf("%s was created with group 0", p)
			}
			return nil
		})
	})
}
