package local_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"

	"github.com/gatebridge/gatebridge/sandbox/local"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

func TestHelperHostTerm(t *testing.T) { sandboxtest.HostTerminalHelper(t, local.New()) }

// A command on a terminal of its own can neither write to nor type into
// gatebridge's controlling terminal.
func TestLocalTTYHostTerminalUntouched(t *testing.T) {
	sandboxtest.HostTerminalUntouched(t, "TestHelperHostTerm")
}

// ptmxOpen counts this process's descriptors of a pty master.
func ptmxOpen(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && (l == "/dev/ptmx" || strings.HasPrefix(l, "/dev/pts/ptmx")) {
			n++
		}
	}
	return n
}

// The terminal's master is closed when Run returns, after an exit, a
// timeout, or a command that left a process holding the terminal.
func TestLocalTTYMasterClosed(t *testing.T) {
	before := ptmxOpen(t)
	for _, script := range []string{"echo hi", "sleep 600", "setsid sleep 600 & echo $!"} {
		spec := &sandbox.Spec{Command: []string{"sh", "-c", script}, TTY: &sandbox.TTYSize{Rows: 24, Cols: 80},
			Timeout: 300 * time.Millisecond, KillGrace: 100 * time.Millisecond}
		res, err := local.New().Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(script, "setsid") { // it escaped the group: ours to end
			pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
			if err != nil || pid <= 1 {
				t.Fatalf("stdout %q, want the pid of the escaped process", res.Stdout)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if after := ptmxOpen(t); after != before {
		t.Errorf("%d pty masters open after the runs, %d before", after, before)
	}
}
