package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
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
			// The exec API's wrapper has it on its command line; the
			// agent's are in its req/ directory (one per running command).
			script := `L=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -E '^/gatebridge/.*/lease(-[0-9a-f]+)?$' | head -1)
[ -p "$L" ] || L=$(ls /gatebridge/agent/req/*.lease 2>/dev/null | head -1)
[ -p "$L" ] || echo "no lease found" >&2
(exec 8<>"$L"; exec sleep ` + marker + `) 2>/dev/null || sleep ` + marker
			args := append([]string{"run"}, mode.args...)
			cmd := exec.Command(binary, append(args, "--", "sh", "-c", script)...)
			cmd.Dir = ws
			var se strings.Builder
			cmd.Stderr = &se
			must(t, cmd.Start())
			if !sandboxtest.Poll(30*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the command did not start: %s", se.String())
			}
			must(t, cmd.Process.Signal(syscall.SIGKILL))
			cmd.Wait()
			if !sandboxtest.Poll(15*time.Second, func() bool { return len(sleepPids(marker)) == 0 }) {
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

// TestSecPersistentTmpdirBounded: in a persistent sandbox too, TMPDIR is
// the container's own /tmp tmpfs of sandbox.limits.tmp_size (set at
// start), not the session's tmp/ on the host's /dev/shm: writing 32 MiB
// into an 8 MiB TMPDIR fails and the session's tmp/ stays empty.
func TestSecPersistentTmpdirBounded(t *testing.T) {
	needBackend(t, "docker")
	ws := workspace(t)
	cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
	must(t, os.WriteFile(cfg, []byte("sandbox:\n  limits:\n    tmp_size: 8388608\n"), 0o644))
	name := randName("tmp")
	if out := gbRaw(t, ws, nil, nil, 0, "--config", cfg, "sandbox", "start", name); out.Code != 0 {
		t.Fatalf("sandbox start: %s", out.Stderr)
	}
	t.Cleanup(func() { gbRaw(t, ws, nil, nil, 0, "--config", cfg, "sandbox", "stop", name) })
	script := `echo "$TMPDIR"; dd if=/dev/zero of="$TMPDIR/f" bs=65536 count=512 2>/dev/null; echo "dd $?"; wc -c < "$TMPDIR/f"; rm -f "$TMPDIR/f"; echo "tmp:$(ls -A "$GATEBRIDGE_SESSION_DIR/tmp" 2>&1 | grep -v '^\.gatebridge-exec-' | tr '\n' ' ')"`
	out := gbRaw(t, ws, nil, nil, 0, "--config", cfg, "run", "--reuse", name, "--", "sh", "-c", script)
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	if len(lines) != 4 || lines[0] != "/tmp" || lines[1] == "dd 0" || lines[3] != "tmp:" {
		t.Fatalf("stdout %q (want /tmp, a failed dd, <= 8 MiB written, an empty session tmp/), stderr %q", out.Stdout, out.Stderr)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(lines[2])); n > 8<<20 || n == 0 {
		t.Errorf("wrote %d bytes into an 8 MiB TMPDIR", n)
	}
}
