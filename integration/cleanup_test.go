package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// TestSessionCleanup checks that nothing outlives gatebridge: the session
// dir, the command's processes and (docker) its container, after a normal
// run and after SIGINT or SIGTERM mid-run (exit 130, 143). The timeout
// case is in TestExitCommandTimeout.
func TestSessionCleanup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		t.Run("normal", func(t *testing.T) {
			sessions := workspace(t)
			out := gb(t, backend, Run{
				Config:  "bridge:\n  session_dir: " + sessions + "\n",
				Command: []string{"sh", "-c", `gb_echo hi; [ -d "$GATEBRIDGE_CALLS_DIR" ] && echo mounted`},
			})
			if out.Code != 0 || out.Stdout != "hi\nmounted\n" {
				t.Errorf("exit %d, stdout %q, stderr %q", out.Code, out.Stdout, out.Stderr)
			}
			assertEmptyDir(t, sessions)
		})
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(sig.String(), func(t *testing.T) {
				interruptRun(t, backend, sig)
			})
		}
	})
}

func interruptRun(t *testing.T, backend string, sig syscall.Signal) {
	sessions := workspace(t)
	cfg := filepath.Join(t.TempDir(), "gatebridge.yaml")
	if err := os.WriteFile(cfg, []byte("bridge:\n  session_dir: "+sessions+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sleep length no other process has: its argv is the marker.
	marker := fmt.Sprint(4000 + rand.IntN(1000000))
	cmd := exec.Command(binary, "--config", cfg, "run", "--sandbox", backend, "--",
		"sh", "-c", `gb_echo started; sleep `+marker+`; echo not reached`)
	cmd.Dir = workspace(t)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	started := sandboxtest.Poll(30*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(sessions, "*", "calls"))
		return len(m) > 0 && len(sleepPids(marker)) > 0
	})
	if !started {
		cmd.Process.Kill()
		<-done
		t.Fatalf("command did not start; stdout %q stderr %q", so.String(), se.String())
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("gatebridge did not exit 30s after %v; stderr %q", sig, se.String())
	}
	if want := 128 + int(sig); cmd.ProcessState.ExitCode() != want {
		t.Errorf("exit %d after %v, want %d; stderr %q", cmd.ProcessState.ExitCode(), sig, want, se.String())
	}
	if so.String() != "started\n" {
		t.Errorf("stdout %q", so.String())
	}
	if want := "gatebridge: interrupted by " + unix.SignalName(sig) + "\n"; !strings.HasSuffix(se.String(), want) {
		t.Errorf("stderr %q, want it to end in %q", se.String(), want)
	}
	assertEmptyDir(t, sessions)
	if len(sleepPids(marker)) > 0 {
		t.Errorf("the command (sleep %s) still runs after gatebridge exited", marker)
	}
	if backend == "docker" {
		ps, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.gatebridge.owner=gatebridge",
			"--filter", fmt.Sprintf("label=io.gatebridge.pid=%d", cmd.Process.Pid)).CombinedOutput()
		if err != nil {
			t.Fatalf("docker ps: %v: %s", err, ps)
		}
		if len(bytes.TrimSpace(ps)) != 0 {
			t.Errorf("containers left after %v: %s", sig, ps)
		}
	}
}
