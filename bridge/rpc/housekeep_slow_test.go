//go:build linux

package rpc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// A sandbox whose processes leave something writing in their sessions
// (a persistent sandbox's daemon; a setsid process under local) makes
// each removal of those sessions run to its time bound, which was 30 s,
// on one of the server's few housekeeping threads. Two of them held
// every thread, and the sessions of every other sandbox of the server
// waited in line: another sandbox's sandbox/close waited for as long as
// the writers went on. A removal on a housekeeping thread now gives up
// quickly and leaves the rest to the prune; other sandboxes go on.
//
// The writers are this test's goroutines, nesting directories in the
// sessions' calls/ from the moment each process has named it, as fast as
// they can, for a few seconds (what held the 30 s removal in a real
// attack: hostilefs.TestRemoveTreeWhileWritten).
func TestSlowRemovalDelaysNoOtherSandbox(t *testing.T) {
	parent, err := os.MkdirTemp("/dev/shm", "gb-test-housekeep-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { hostilefs.RemoveTree(parent) })
	opts := testOptions(t)
	opts.Bridge.Dir = parent
	c := newClient(t, opts)
	c.openSandbox("a", "local", false)
	c.openSandbox("b", "local", false)

	const writeFor = 4 * time.Second
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	n := max(2, runtime.GOMAXPROCS(0)) + 1 // more than the housekeeping threads
	for i := range n {
		id := fmt.Sprintf("a%d", i)
		// The process names its calls dir, then lives on a little while
		// the writer starts nesting there.
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "a",
			Argv: []string{"sh", "-c", `echo "$GATEBRIDGE_CALLS_DIR"; sleep 0.3`}}, nil)
		m := c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
		var out ProcessOutputParams
		if err := json.Unmarshal(m.Params, &out); err != nil || out.ProcessID != id {
			t.Fatalf("first output: %s", m.Params)
		}
		calls := strings.TrimSpace(string(out.Chunk))
		if !strings.HasPrefix(calls, parent) {
			t.Fatalf("process %s printed %q, not a calls dir under %s", id, calls, parent)
		}
		fd, err := unix.Open(calls, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				t.Fatalf("%s was removed before the writer started", calls)
			}
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { unix.Close(fd) }()
			until := time.Now().Add(writeFor)
			for time.Now().Before(until) {
				select {
				case <-stop:
					return
				default:
				}
				if unix.Mkdirat(fd, "d", 0o700) != nil {
					return // removed under it
				}
				next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					return
				}
				unix.Close(fd)
				fd = next
			}
		}()
		c.Collect(id, 30*time.Second, nil)
	}
	start := time.Now()
	c.Run("b", "b1", nil, "true")
	c.Call(MethodSandboxClose, SandboxCloseParams{SandboxID: "b"}, nil)
	took := time.Since(start)
	t.Logf("sandbox b ran a command and closed in %v", took)
	if took > writeFor/2 {
		t.Errorf("sandbox b took %v to run true and close while sandbox a's sessions were being written: it waited for their removal", took)
	}
}
