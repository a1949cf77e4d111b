//go:build linux

package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// shells are the sh agent's shells that are installed here: dash and
// busybox sh (the shells of minimal images), each as a path to run.
func shells(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, shell := range []string{"/bin/dash", "/bin/busybox"} {
		if _, err := os.Stat(shell); err != nil {
			t.Logf("%s: not installed", shell)
			continue
		}
		sh := shell
		if filepath.Base(shell) == "busybox" {
			// busybox runs as sh when called so.
			sh = filepath.Join(t.TempDir(), "sh")
			if err := os.Symlink(shell, sh); err != nil {
				t.Fatal(err)
			}
		}
		out[filepath.Base(shell)] = sh
	}
	if len(out) == 0 {
		t.Skip("neither dash nor busybox is installed")
	}
	return out
}

// plantPgid is a command that does what any command in the sandbox can:
// it finds the sh agent's record of its own process group in out/ (the
// agent's user, which is the command's, writes out/), replaces it with
// $TARGET, says "planted" and sleeps, waiting for the host's signal.
const plantPgid = `O=$1
i=0
while [ "$i" -lt 1000 ]; do
  for f in "$O"/.*.pgid; do
    [ -f "$f" ] || continue
    read -r p <"$f" || continue
    if [ "$p" = "$$" ]; then
      printf '%s\n' "$TARGET" >"$f"
      echo planted
      exec sleep 30
    fi
  done
  sleep 0.01; i=$((i+1))
done
echo "no record of process group $$ in $O" >&2
exit 3`

// lineWriter reports when a line holding want has been written.
type lineWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func newLineWriter(want string) *lineWriter {
	return &lineWriter{want: want, seen: make(chan struct{})}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestShAgentForgedProcessGroup: the sh agent signals a command's process
// group when the host asks. A command that replaces the agent's record of
// that group (a file in out/, which the sandbox writes) must not turn the
// host's signal on another target: a process group outside the agent,
// the agent's own group, or another command of the agent. (Under the
// first sh agent each of them got the SIGTERM meant for the command.)
func TestShAgentForgedProcessGroup(t *testing.T) {
	for shName, sh := range shells(t) {
		t.Run(shName, func(t *testing.T) {
			t.Run("foreign group", func(t *testing.T) {
				c, dir, _ := startShAgentCmd(t, sh)
				decoy := exec.Command("sleep", "60")
				decoy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := decoy.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan struct{})
				go func() { decoy.Wait(); close(exited) }()
				t.Cleanup(func() { decoy.Process.Kill(); <-exited })
				forgeAndSignal(t, c, dir, decoy.Process.Pid)
				select {
				case <-exited:
					t.Fatalf("the decoy (process group %d) got the signal meant for the command: %v", decoy.Process.Pid, decoy.ProcessState)
				case <-time.After(500 * time.Millisecond):
				}
			})
			t.Run("the agent's own group", func(t *testing.T) {
				c, dir, cmd := startShAgentCmd(t, sh)
				forgeAndSignal(t, c, dir, cmd.Process.Pid)
				time.Sleep(500 * time.Millisecond)
				if st := procState(cmd.Process.Pid); st == "" || st == "Z" {
					t.Fatalf("the agent (pid %d, state %q) got the signal meant for the command", cmd.Process.Pid, st)
				}
				res, err := c.Run(context.Background(), agent.Command{Argv: []string{"echo", "still here"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}, &sandbox.Spec{})
				if err != nil || res.ExitCode != 0 || string(res.Stdout) != "still here\n" {
					t.Fatalf("the agent does not run commands after the forged signal: %v %+v", err, res)
				}
			})
			t.Run("another command", func(t *testing.T) {
				c, dir, _ := startShAgentCmd(t, sh)
				tmp := t.TempDir()
				pidFile := filepath.Join(tmp, "a.pid")
				other := make(chan result, 1)
				go func() {
					res, err := c.Run(context.Background(), agent.Command{
						Argv: []string{"/bin/sh", "-c", `echo $$ >"$1.tmp" && mv "$1.tmp" "$1"; sleep 2; echo done`, "sh", pidFile},
						Env:  []string{"PATH=/usr/bin:/bin"}, Dir: "/"}, &sandbox.Spec{})
					other <- result{res, err}
				}()
				var pid int
				if !sandboxtest.Poll(10*time.Second, func() bool {
					b, err := os.ReadFile(pidFile)
					pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
					return err == nil && pid > 0
				}) {
					t.Fatal("the other command did not start")
				}
				forgeAndSignal(t, c, dir, pid)
				r := wait(t, other)
				if r.err != nil || r.res.ExitCode != 0 || string(r.res.Stdout) != "done\n" {
					t.Fatalf("the other command (process group %d) got the signal meant for the command: %v %+v", pid, r.err, r.res)
				}
			})
		})
	}
}

// forgeAndSignal runs plantPgid with target, waits until it has replaced
// its process group's record, and has the host send it SIGTERM. The
// command itself then runs on: Close ends it (through its lease) when the
// test is over.
func forgeAndSignal(t *testing.T, c *agent.Conn, dir string, target int) {
	t.Helper()
	planted := newLineWriter("planted\n")
	sigs := make(chan syscall.Signal, 1)
	done := make(chan result, 1)
	go func() {
		res, err := c.Run(context.Background(), agent.Command{
			Argv: []string{"/bin/sh", "-c", plantPgid, "sh", filepath.Join(dir, agent.DirOut)},
			Env:  []string{"PATH=/usr/bin:/bin", "TARGET=" + strconv.Itoa(target)}, Dir: "/"},
			&sandbox.Spec{Stdout: planted, Signals: sigs})
		done <- result{res, err}
	}()
	select {
	case <-planted.seen:
	case r := <-done:
		t.Fatalf("the forging command ended early: %v %+v", r.err, r.res)
	case <-time.After(15 * time.Second):
		t.Fatal("the forging command did not plant its record")
	}
	sigs <- syscall.SIGTERM
	t.Cleanup(func() {
		c.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the forging command's Run did not return after Close")
		}
	})
}

// procState is the state letter of pid in /proc/PID/stat ("" when gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndex(s, ") "); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}
