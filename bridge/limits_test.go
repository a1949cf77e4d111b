package bridge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

func bigGate(n int) gates.Gate {
	return gates.Func(gates.Spec{Name: "t_big"}, func(ctx context.Context, c *gates.Call) (int, error) {
		c.Stdout.Write([]byte(strings.Repeat("x", n)))
		return 0, nil
	})
}

// Responses were kept until the session ended, on the host's tmpfs: 600
// calls of a 4 MiB output grew host memory by 2.5 GB. Now the wrapper
// acknowledges each response it printed and the host removes it, so the
// session holds about one response at a time.
func TestResponsesRemovedOnceRead(t *testing.T) {
	// 300 MiB in all: past the default max_session_bytes (256 MiB), so
	// responses held instead of removed would also fail calls with 126.
	const calls, size = 300, 1 << 20
	reg := gates.NewRegistry()
	reg.MustRegister(bigGate(size))
	s, err := Open(Config{Gates: reg, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c",
		fmt.Sprintf(`i=0; while [ $i -lt %d ]; do t_big > /dev/null || exit 1; i=$((i+1)); done; echo done`, calls)}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	s.srv.drain()
	ents, _ := os.ReadDir(s.Dirs().Responses)
	var calls_ []os.DirEntry
	all, _ := os.ReadDir(s.Dirs().Calls)
	s.srv.mu.Lock()
	for _, e := range all {
		if !s.srv.slotFree[e.Name()] { // free slots wait for the next call
			calls_ = append(calls_, e)
		}
	}
	peak, held := s.srv.peakHeld, s.srv.heldBytes
	s.srv.mu.Unlock()
	t.Logf("%d calls of %d bytes: %d response files left, %d call entries, peak held %d bytes", calls, size, len(ents), len(calls_), peak)
	if len(ents) != 0 || len(calls_) != 0 || held != 0 {
		t.Errorf("left %d response files, %d call entries, %d bytes held", len(ents), len(calls_), held)
	}
	if peak > 2*size+4096 {
		t.Errorf("peak held %d bytes: responses were not removed as they were read", peak)
	}
}

// Past max_session_bytes of unread responses a call gets exit 126 naming
// the key. A caller that never acknowledges (it writes the call by hand)
// holds its responses.
func TestSessionBytesCap(t *testing.T) {
	reg := gates.NewRegistry()
	reg.MustRegister(bigGate(4096))
	s, err := Open(Config{Gates: reg, Dir: t.TempDir(), Limits: Limits{MaxSessionBytes: 10000}, LimitKey: cliLimitKey})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Calls by hand (no ack): two fit, the third is refused.
	script := `for i in 1 2 3; do mkdir "$GATEBRIDGE_CALLS_DIR/h$i"; printf t_big > "$GATEBRIDGE_CALLS_DIR/h$i/gate"; : > "$GATEBRIDGE_CALLS_DIR/h$i/ready"
  while [ ! -f "$GATEBRIDGE_RESPONSES_DIR/h$i.exit" ]; do sleep 0.01; done; echo "h$i $(cat "$GATEBRIDGE_RESPONSES_DIR/h$i.exit")"; done
cat "$GATEBRIDGE_RESPONSES_DIR/h3.stderr"
: > "$GATEBRIDGE_CALLS_DIR/h1.done"; sleep 0.3
t_big | wc -c`
	res, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "h1 0\nh2 0\nh3 126\n") || !strings.Contains(out, "limit set by bridge.limits.max_session_bytes=10000") ||
		!strings.HasSuffix(out, "4096\n") {
		t.Errorf("stdout %q stderr %q", out, res.Stderr)
	}
}

// run --timeout 1s with a gate that sleeps 12 s took 12 s. Now the gates
// of a timed-out run are cancelled (one ignoring that is abandoned after
// 0.5 s), and the record says so.
func TestTimeoutBoundsRun(t *testing.T) {
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_stubborn", Timeout: time.Minute}, func(ctx context.Context, c *gates.Call) (int, error) {
		time.Sleep(5 * time.Second) // ignores ctx on purpose
		return 0, nil
	}))
	s, err := Open(Config{Gates: reg, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := s.Run(context.Background(), local.New(), sandbox.Spec{Command: []string{"sh", "-c", "t_stubborn"},
		Timeout: time.Second, KillGrace: 200 * time.Millisecond})
	took := time.Since(start)
	if err != nil || !res.TimedOut {
		t.Fatalf("%v %+v", err, res)
	}
	closeStart := time.Now()
	s.Close()
	t.Logf("run took %v, close %v", took, time.Since(closeStart))
	if took > 3*time.Second {
		t.Errorf("run took %v with a 1s timeout", took)
	}
	if d := time.Since(closeStart); d > 2*time.Second {
		t.Errorf("Close waited %v for an abandoned gate", d)
	}
	if len(res.Calls) != 1 || res.Calls[0].Decision != DecisionCanceled || res.Calls[0].ExitCode != 124 {
		t.Errorf("calls %+v", res.Calls)
	}
}

// A gate abandoned at its timeout keeps its max_concurrent slot until it
// really returns: the next call waits instead of running beside it.
func TestAbandonedGateKeepsSlot(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Time
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_hog", Timeout: 200 * time.Millisecond}, func(ctx context.Context, c *gates.Call) (int, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		time.Sleep(1500 * time.Millisecond) // ignores ctx on purpose
		return 0, nil
	}))
	s, err := Open(Config{Gates: reg, Dir: t.TempDir(), Limits: Limits{MaxConcurrent: 1, GateTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", "t_hog; echo $?; t_hog; echo $?"}})
	if err != nil || string(res.Stdout) != "124\n124\n" {
		t.Fatalf("%v %q %q", err, res.Stdout, res.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 || starts[1].Sub(starts[0]) < 1400*time.Millisecond {
		t.Errorf("second gate started %v after the first, which still ran (max_concurrent=1)", starts[1].Sub(starts[0]))
	}
}

// Prune removes sessions whose lock is free (their gatebridge died),
// including parts made unreadable, and leaves live and kept ones alone.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	mk := func(hex string, lock bool) string {
		root := filepath.Join(dir, "gb-"+hex)
		if err := os.MkdirAll(filepath.Join(root, "calls", "x", "y"), 0o700); err != nil {
			t.Fatal(err)
		}
		if lock {
			os.WriteFile(root+".lock", nil, 0o600)
		}
		return root
	}
	dead := mk(strings.Repeat("a", 32), true)
	os.Chmod(filepath.Join(dead, "calls", "x"), 0)
	live, err := Open(Config{Gates: testRegistry(t), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// Open pruned its parent (once per process).
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("Open did not prune %s", dead)
	}
	dead = mk(strings.Repeat("d", 32), true)
	os.Chmod(filepath.Join(dead, "calls", "x"), 0)
	kept := mk(strings.Repeat("b", 32), true)
	os.WriteFile(kept+".kept", nil, 0o600)
	young := mk(strings.Repeat("c", 32), false) // no lock, just made: maybe being created
	other := filepath.Join(dir, "not-a-session")
	os.Mkdir(other, 0o700)

	removed, err := PruneSessions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != dead {
		t.Errorf("removed %v, want only %s", removed, dead)
	}
	for _, p := range []string{live.Dirs().Root, kept, young, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Stat(dead + ".lock"); err == nil {
		t.Error("the dead session's lock file is left")
	}
}
