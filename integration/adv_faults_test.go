package integration

// Faults: gates that hang or flood, wrappers and commands killed mid-call,
// gatebridge itself signalled mid-call, calls from background processes at
// exit, and a full session filesystem.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// TestAdversarialFaults: a gate past its timeout (124, process gone), a
// gate flooding output (capped, marked), a wrapper killed while waiting,
// and the command killed with a call in flight.
func TestAdversarialFaults(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		h := newAdvHost(t)
		sessions := t.TempDir()
		os.Chmod(sessions, 0o755)
		// The sleep argument is unique per backend so leftover processes
		// can be found.
		marker := map[string]string{"local": "31.71", "bwrap": "31.72", "docker": "31.73"}[backend]
		cfg := fmt.Sprintf(`
bridge:
  session_dir: %s
  limits:
    max_output_bytes: 65536
gates:
  commands:
    - name: slowgate
      command: [sleep, "1"]
    - name: hang
      command: [sleep, %q]
      timeout: 1s
audit:
  path: %s
`, sessions, marker, h.audit)
		script := advPrelude + `
hang > /dev/null 2>"$T/e"; echo "hang|$?||$(tr '\n' ' ' < "$T/e")"
head -c 200000 /dev/zero | tr '\0' a | gb_echo 2>"$T/e" | wc -c > "$T/n"; echo "flood|$(tr -d ' ' < "$T/n")||$(tr '\n' ' ' < "$T/e")"
slowgate & p=$!; sleep 0.3; kill -9 $p; wait $p; echo "killed|$?"
gb_echo after > "$T/o"; echo "after|$?|$(cat "$T/o")"
slowgate & sleep 0.3
kill -9 $$
`
		start := time.Now()
		res, out := gbJSON(t, backend, Run{Command: []string{"sh", "-c", script}, Config: cfg})
		took := time.Since(start)
		got := advResults(res.Stdout)
		defer func() {
			if t.Failed() {
				t.Logf("command stdout:\n%s\ncommand stderr:\n%s\ngatebridge stderr:\n%s", res.Stdout, res.Stderr, out.Stderr)
			}
		}()
		if res.ExitCode != 137 || out.Code != 137 {
			t.Errorf("command killed by SIGKILL: result exit %d, gatebridge exit %d; want 137", res.ExitCode, out.Code)
		}
		if g := got["hang"]; g.exit != "124" || g.stderr != "gatebridge: hang: timed out after 1s (gate timeout, set by the gate itself)" {
			t.Errorf("hang: %+v", g)
		}
		if g := got["flood"]; g.exit != "65536" || g.stderr != "gatebridge: gb_echo: output truncated: 134464 bytes dropped (bridge.limits.max_output_bytes=65536)" {
			t.Errorf("flood: %+v", g)
		}
		if g := got["killed"]; g.exit != "137" {
			t.Errorf("killed wrapper: %+v", g)
		}
		if g := got["after"]; g.exit != "0" || g.stdout != "after" {
			t.Errorf("call after a killed wrapper: %+v", g)
		}
		if took > 20*time.Second {
			t.Errorf("run took %v", took)
		}
		decisions := map[string][]string{}
		for _, c := range res.Calls {
			decisions[c.Gate] = append(decisions[c.Gate], c.Decision)
		}
		if d := strings.Join(decisions["hang"], ","); d != "timed_out" {
			t.Errorf("hang decisions %q", d)
		}
		// The killed wrapper's call and the one in flight when the command
		// was killed: both callers went away, so both gates were cancelled
		// (they used to run to the end for no one).
		if d := strings.Join(decisions["slowgate"], ","); d != "canceled,canceled" {
			t.Errorf("slowgate decisions %q (the killed wrapper's call and the one in flight at the kill)", d)
		}
		if p := sleepPids(marker); len(p) > 0 {
			t.Errorf("timed-out gate process still running: %v", p)
		}
		assertEmptyDir(t, sessions)
	})
}

// TestAdversarialSignals sends SIGTERM and SIGINT to gatebridge while a gate
// runs: it exits promptly with 128+signal, the gate's process and the
// sandbox are gone, and so is the session directory.
func TestAdversarialSignals(t *testing.T) {
	for _, backend := range []string{"local", "bwrap", "docker"} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			if backend == "docker" && sig == syscall.SIGINT {
				continue // one docker run is enough
			}
			t.Run(backend+"/"+sig.String(), func(t *testing.T) {
				needBackend(t, backend)
				t.Parallel()
				sessions := t.TempDir()
				os.Chmod(sessions, 0o755)
				marker := fmt.Sprintf("33.%d%d", len(backend), int(sig))
				cfg := fmt.Sprintf(`
bridge:
  session_dir: %s
gates:
  commands:
    - name: hang
      command: [sleep, %q]
`, sessions, marker)
				p := filepath.Join(t.TempDir(), "gatebridge.yaml")
				must(t, os.WriteFile(p, []byte(cfg), 0o644))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, binary, "--config", p, "run", "--sandbox", backend, "--",
					"sh", "-c", "echo started; hang; echo after-hang")
				cmd.Dir = workspace(t)
				var so, se bytes.Buffer
				cmd.Stdout, cmd.Stderr = &so, &se
				must(t, cmd.Start())
				if !sandboxtest.Poll(20*time.Second, func() bool { return len(sleepPids(marker)) > 0 }) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the gate never started; stderr %s", se.String())
				}
				sent := time.Now()
				cmd.Process.Signal(sig)
				cmd.Wait()
				took := time.Since(sent)
				if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
					t.Errorf("exit %d after %v, want %d; stderr %s", code, sig, 128+int(sig), se.String())
				}
				if took > 10*time.Second {
					t.Errorf("gatebridge took %v to exit after %v", took, sig)
				}
				if strings.Contains(so.String(), "after-hang") {
					t.Errorf("the command went on after the signal: %q", so.String())
				}
				if !sandboxtest.Poll(3*time.Second, func() bool { return len(sleepPids(marker)) == 0 }) {
					t.Errorf("gate process still running after gatebridge exited: %v", sleepPids(marker))
				}
				assertEmptyDir(t, sessions)
			})
		}
	}
}

// TestAdversarialBackgroundAtExit: a background process that ignores
// SIGTERM calls a gate after the command exited. Local answers it (the
// group is killed only after kill_grace) and records it; bwrap and docker
// kill it with the sandbox. Nothing hangs either way.
func TestAdversarialBackgroundAtExit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		start := time.Now()
		res, out := gbJSON(t, backend, Run{Command: []string{"sh", "-c",
			`(trap '' TERM; gb_echo early >/dev/null; sleep 0.5; gb_echo late) & sleep 0.2; exit 3`}})
		if res.ExitCode != 3 || out.Code != 3 {
			t.Errorf("exit %d/%d, want 3", res.ExitCode, out.Code)
		}
		args := map[string]string{}
		for _, c := range res.Calls {
			args[strings.Join(c.Args, " ")] = c.Decision
		}
		if args["early"] != "ran" {
			t.Errorf("the background call made before exit was not answered: %+v", res.Calls)
		}
		if backend == "local" && args["late"] != "ran" {
			t.Errorf("the background call made after exit was not answered: %+v", res.Calls)
		}
		if time.Since(start) > 15*time.Second {
			t.Errorf("run took %v", time.Since(start))
		}
	})
}

// TestAdversarialSessionFSFull puts the session dir on a small tmpfs and
// fills it from inside: a response too big to write is replaced by a clear
// error (never a partial output read as complete), and a call that cannot
// even be published fails in the wrapper.
func TestAdversarialSessionFSFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		sessions := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", sessions).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", sessions).Run() })
		ws := workspace(t)
		must(t, os.WriteFile(filepath.Join(ws, "big"), bytes.Repeat([]byte("0123456789abcdef"), 1<<18), 0o644)) // 4 MiB
		cfg := fmt.Sprintf("bridge:\n  session_dir: %s\n", sessions)
		// TMPDIR is the sandbox's own tmpfs now: fill the session fs through
		// calls/, the one place there the sandbox writes (an unpublished
		// call dir the host leaves alone).
		script := advPrelude + `
T="$C/filler"; mkdir "$T"
head -c 1048576 /dev/zero > "$T/keep"
dd if=/dev/zero of="$T/fill" bs=65536 2>/dev/null
rm -f "$T/keep"
read_file big > "$T/out" 2>"$T/err"; echo "big|$?|$(wc -c < "$T/out" | tr -d ' ')|$(tr '\n' ' ' < "$T/err")"
gb_echo small > "$T/out"; echo "small|$?|$(cat "$T/out")"
rm -f "$T/out" "$T/err"
# The host frees the last call's pages (its answer, its argv) after the
# caller has its answer; wait for that, or it could free room after fill2.
n=0; while { [ -n "$(ls -A "$R")" ] || ls "$C"/*/argv >/dev/null 2>&1; } && [ $n -lt 500 ]; do n=$((n+1)); sleep 0.01; done
dd if=/dev/zero of="$T/fill2" bs=4096 2>/dev/null
gb_echo full 2>&1; echo "full|$?"
`
		res, out := gbJSON(t, backend, Run{Command: []string{"sh", "-c", script}, Config: cfg, Dir: ws})
		got := advResults(res.Stdout)
		defer func() {
			if t.Failed() {
				t.Logf("command stdout:\n%s\ncommand stderr:\n%s\ngatebridge stderr:\n%s", res.Stdout, res.Stderr, out.Stderr)
			}
		}()
		// The caller may have got the streamed start of the output (up to
		// 64 KiB, when the gate ran past 50 ms under load) before the rest
		// could not be written; never more, and never with exit 0.
		streamed, _ := strconv.Atoi(got["big"].stdout)
		if g := got["big"]; g.exit != "1" || streamed > 64<<10 ||
			!strings.HasPrefix(g.stderr, "gatebridge: cannot write the response: ") || !strings.HasSuffix(g.stderr, "no space left on device") {
			t.Errorf("big response on a full session fs: %+v", g)
		}
		if g := got["small"]; g.exit != "0" || g.stdout != "small" {
			t.Errorf("small call after the failure: %+v", g)
		}
		if g := got["full"]; g.exit != "1" {
			t.Errorf("call on a completely full fs: %+v", g)
		}
		if !strings.Contains(res.Stdout, "gatebridge: gb_echo: cannot write") {
			t.Errorf("no wrapper error for the call that could not be written")
		}
		var calls []map[string]any
		json.Unmarshal([]byte(out.Stdout), &struct {
			Calls *[]map[string]any `json:"calls"`
		}{&calls})
		assertEmptyDir(t, sessions)
	})
}
