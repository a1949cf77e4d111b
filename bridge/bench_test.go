package bridge

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
)

// BenchmarkHandleCall measures the host's hot path for one call: the event
// (or scan) that notices it, claim, read, dispatch to a gate, the atomic
// response files, the wake-up and the removal of the call directory. The
// client is this benchmark publishing calls in the v1 layout with plain Go
// file writes and polling for .exit, so no process start is included.
//
//	go test ./bridge -run '^$' -bench HandleCall -benchmem
func BenchmarkHandleCall(b *testing.B) {
	for _, mode := range []WatchMode{WatchEvents, WatchPoll} {
		b.Run(string(mode), func(b *testing.B) {
			benchHandleCall(b, mode, b.TempDir())
		})
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		b.Run("events-tmpfs", func(b *testing.B) {
			dir, err := os.MkdirTemp("/dev/shm", "gb-bench-")
			if err != nil {
				b.Skip(err)
			}
			defer os.RemoveAll(dir)
			benchHandleCall(b, WatchEvents, dir)
		})
	}
}

func benchHandleCall(b *testing.B, mode WatchMode, dir string) {
	reg := testRegistryB(b)
	s, err := Open(Config{Gates: reg, Dir: dir, Watch: mode, PollInterval: time.Millisecond,
		Limits: Limits{MaxCalls: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	calls, resp := s.Dirs().Calls, s.Dirs().Responses
	n := 0
	for b.Loop() {
		n++
		id := "bench-" + strconv.Itoa(n)
		cd := filepath.Join(calls, id)
		if err := os.MkdirAll(filepath.Join(cd, "args"), 0o755); err != nil {
			b.Fatal(err)
		}
		os.WriteFile(filepath.Join(cd, "args", "0"), []byte("hello"), 0o644)
		os.WriteFile(filepath.Join(cd, "gate"), []byte("t_echo"), 0o644)
		os.WriteFile(filepath.Join(cd, "ready"), nil, 0o644)
		exit := filepath.Join(resp, id+".exit")
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(exit); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("call %s: no response", id)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	b.StopTimer()
	s.srv.drain()
	recs, _ := s.d.Records()
	for _, r := range recs {
		if r.ExitCode != 0 {
			b.Fatalf("call %s: exit %d: %s", r.ID, r.ExitCode, r.Error)
		}
	}
}

func testRegistryB(b *testing.B) *gates.Registry {
	b.Helper()
	r := gates.NewRegistry()
	r.MustRegister(echoGate("t_echo"))
	return r
}
