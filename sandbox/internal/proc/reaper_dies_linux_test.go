package proc_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
	"github.com/gatebridge/gatebridge/sandbox/local"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// TestHelperReaperKilled is not a test: it is the gatebridge process that
// TestKilledReaperReplaced kills. It starts one command, kills its reaper,
// then starts another (which starts a new reaper).
func TestHelperReaperKilled(t *testing.T) {
	first, second := os.Getenv("GATEBRIDGE_TEST_HELPER_FIRST"), os.Getenv("GATEBRIDGE_TEST_HELPER_SECOND")
	if first == "" || second == "" {
		t.Skip("helper process only")
	}
	run := func(m string) {
		go local.New().Run(context.Background(), &sandbox.Spec{Command: []string{"sh", "-c", "sleep " + m + " & sleep " + m + "; :"}})
		if !sandboxtest.Poll(10*time.Second, func() bool { return len(sandboxtest.HostProcesses(m)) >= 2 }) {
			os.Exit(4)
		}
	}
	run(first)
	old := proc.ReaperPID()
	if old == 0 {
		os.Exit(5)
	}
	syscall.Kill(old, syscall.SIGKILL)
	if !sandboxtest.Poll(10*time.Second, func() bool { return proc.ReaperPID() == 0 }) {
		os.Exit(6)
	}
	run(second)
	if p := proc.ReaperPID(); p == 0 || p == old {
		os.Exit(7)
	}
	os.Stdout.WriteString("ready\n")
	select {}
}

// A command can kill the reaper (a local command runs as the same user).
// The next command starts a new one, and that one also kills the groups
// listed before it started when gatebridge dies: nothing of either
// command survives.
func TestKilledReaperReplaced(t *testing.T) {
	first, second := sandboxtest.Marker(), sandboxtest.Marker()
	t.Cleanup(func() { sandboxtest.KillMarked(first); sandboxtest.KillMarked(second) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReaperKilled$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GATEBRIDGE_TEST_HELPER_FIRST="+first, "GATEBRIDGE_TEST_HELPER_SECOND="+second)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q, %v (exit %v)", line, err, cmd.ProcessState)
	}
	cmd.Process.Kill()
	if !sandboxtest.Poll(5*time.Second, func() bool {
		return len(sandboxtest.HostProcesses(first))+len(sandboxtest.HostProcesses(second)) == 0
	}) {
		t.Errorf("still running after gatebridge was killed: first command %v, second %v",
			sandboxtest.HostProcesses(first), sandboxtest.HostProcesses(second))
	}
}
