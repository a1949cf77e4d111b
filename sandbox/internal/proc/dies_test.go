package proc_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/local"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// TestHelperRun is not a test: it is the gatebridge process that
// TestSandboxDiesWithGatebridge kills.
func TestHelperRun(t *testing.T) {
	marker := os.Getenv("GATEBRIDGE_TEST_HELPER_MARKER")
	if marker == "" {
		t.Skip("helper process only")
	}
	var b sandbox.Backend = local.New()
	if os.Getenv("GATEBRIDGE_TEST_HELPER_BACKEND") == "bwrap" {
		b = bwrap.New()
	}
	// Keep the scheduler busy on several threads while the sandbox runs,
	// as a real gatebridge would be.
	for range 4 {
		go func() {
			for {
				time.Sleep(time.Microsecond)
			}
		}()
	}
	// A descendant too: sh's background sleep is not the process
	// gatebridge started.
	b.Run(context.Background(), &sandbox.Spec{Command: []string{"sh", "-c", "sleep " + marker + " & sleep " + marker + "; :"}})
	os.Exit(3)
}

// When gatebridge dies (SIGKILL, no cleanup at all), the command and what
// it started die with it: local, the parent-death signal for the command
// and the reaper for its process group; bwrap, --die-with-parent for
// everything in the sandbox.
func TestSandboxDiesWithGatebridge(t *testing.T) {
	for _, name := range []string{"local", "bwrap"} {
		t.Run(name, func(t *testing.T) {
			if name == "bwrap" {
				sandboxtest.RequireBackend(t, bwrap.New())
			}
			t.Parallel()
			m := sandboxtest.Marker()
			t.Cleanup(func() { sandboxtest.KillMarked(m) })
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRun$", "-test.count=1")
			cmd.Env = append(os.Environ(), "GATEBRIDGE_TEST_HELPER_MARKER="+m, "GATEBRIDGE_TEST_HELPER_BACKEND="+name)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			if !sandboxtest.Poll(10*time.Second, func() bool { return len(sandboxtest.HostProcesses(m)) >= 2 }) {
				cmd.Process.Kill()
				t.Fatal("the sandboxed sleep never started")
			}
			time.Sleep(200 * time.Millisecond) // let the helper's threads churn
			cmd.Process.Kill()
			if !sandboxtest.Poll(5*time.Second, func() bool { return len(sandboxtest.HostProcesses(m)) == 0 }) {
				t.Errorf("still running after gatebridge was killed: %v", sandboxtest.HostProcesses(m))
			}
		})
	}
}
