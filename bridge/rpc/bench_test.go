package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// The benchmarks measure each pair side by side, alternating within one
// run (this machine is shared and noisy: only ratios measured together
// mean something). make bench runs them.

// BenchmarkProcessStart alternates the client starting `true` itself
// (spawn) with process/start of `true` through a warm server, local
// backend, up to process/exited (serve); it reports both and their ratio,
// and the local backend's own Run of `true` without a server or session
// (local-run: its crash supervisor, a sh that kills the command's group if
// gatebridge dies, is one more process start).
func BenchmarkProcessStart(b *testing.B) {
	c := newClient(b, testOptions(b))
	c.openSandbox("sb", "local", false)
	ws := b.TempDir()
	var spawn, backend, serve time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		tb := time.Now()
		if _, err := sandbox.NewLocal().Run(context.Background(), &sandbox.Spec{Command: []string{"true"}, Workspace: ws}); err != nil {
			b.Fatal(err)
		}
		backend += time.Since(tb)
		t1 := time.Now()
		id := fmt.Sprint("p", i)
		c.call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb", Argv: []string{"true"}}, nil)
		if o := c.collect(id, time.Minute); o.exited.ExitCode != 0 {
			b.Fatalf("exit %+v", o.exited)
		}
		t2 := time.Now()
		spawn += t1.Sub(t0)
		serve += t2.Sub(t1)
	}
	b.ReportMetric(ms(spawn, b.N), "spawn-ms")
	b.ReportMetric(ms(backend, b.N), "local-run-ms")
	b.ReportMetric(ms(serve, b.N), "serve-ms")
	b.ReportMetric(float64(serve)/float64(spawn), "ratio")
}

func ms(d time.Duration, n int) float64 { return float64(d) / float64(n) / 1e6 }

// BenchmarkGateCall alternates batches of calls, from a shell loop in the
// sandbox, to a gate the client answers (gate/call: runtime) and to a Go
// gate of the server (go); it reports the time per call of each.
func BenchmarkGateCall(b *testing.B) {
	opts := testOptions(b)
	base := opts.Gates
	opts.Gates = func(ws, in string, w bool) (*gates.Registry, map[string]string, error) {
		reg, kinds, err := base(ws, in, w)
		if err == nil {
			reg.Register(gates.Func(gates.Spec{Name: "gogate"}, func(ctx context.Context, c *gates.Call) (int, error) {
				c.Stdout.Write([]byte("ok\n"))
				return 0, nil
			}))
			kinds["gogate"] = "go"
		}
		return reg, kinds, err
	}
	c := newClient(b, opts)
	c.call(MethodGateRegister, GateRegisterParams{Name: "rtgate"}, nil)
	c.openSandbox("sb", "local", false)
	const batch = 20
	loop := func(id, gate string) time.Duration {
		t0 := time.Now()
		c.call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb",
			Argv: []string{"sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do %s >/dev/null || exit 1; i=$((i+1)); done", batch, gate)}}, nil)
		for {
			m := c.next(time.Minute, func(m *Message) bool {
				return m.Method == MethodProcessExited || m.Method == MethodGateCall
			})
			if m.Method == MethodGateCall {
				c.respond(m, GateCallResult{Stdout: []byte("ok\n")}, nil)
				continue
			}
			var ex ProcessExitedParams
			json.Unmarshal(m.Params, &ex)
			if ex.ExitCode != 0 {
				b.Fatalf("%s loop exit %d", gate, ex.ExitCode)
			}
			return time.Since(t0)
		}
	}
	var rt, goG time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rt += loop(fmt.Sprint("rt", i), "rtgate")
		goG += loop(fmt.Sprint("go", i), "gogate")
	}
	b.ReportMetric(ms(rt, b.N*batch), "runtime-ms/call")
	b.ReportMetric(ms(goG, b.N*batch), "go-ms/call")
}

// TestSoak: 10 sandboxes × 10 processes, each streaming 10 MB and making
// gate calls, in one server: every byte arrives, in order (a SHA-256 made
// inside matches the bytes received), and it reports gate latency and the
// heap. Set GATEBRIDGE_SOAK=1 (make bench) to run it.
func TestSoak(t *testing.T) {
	if os.Getenv("GATEBRIDGE_SOAK") == "" {
		t.Skip("a soak run: GATEBRIDGE_SOAK=1 (make bench)")
	}
	const sandboxes, procs, mb, calls = 10, 10, 10, 20
	opts := testOptions(t)
	opts.MaxProcesses = sandboxes * procs
	audit := &lockedBuffer{}
	opts.Bridge.Audit = audit
	c := newClient(t, opts)
	c.call(MethodGateRegister, GateRegisterParams{Name: "tick"}, nil)
	for s := 0; s < sandboxes; s++ {
		c.openSandbox(fmt.Sprint("sb", s), "local", false)
	}
	// Inside: the stream and its hash; then timed gate calls.
	script := fmt.Sprintf(`head -c %d /dev/urandom > "$TMPDIR/d.$$"; sha256sum < "$TMPDIR/d.$$" >&2; cat "$TMPDIR/d.$$"; rm "$TMPDIR/d.$$"; i=0; while [ $i -lt %d ]; do tick >/dev/null; i=$((i+1)); done`, mb<<20, calls)
	start := time.Now()
	for s := 0; s < sandboxes; s++ {
		for p := 0; p < procs; p++ {
			c.call(MethodProcessStart, ProcessStartParams{ProcessID: fmt.Sprintf("s%dp%d", s, p), SandboxID: fmt.Sprint("sb", s),
				Argv: []string{"sh", "-c", script}}, nil)
		}
	}
	hashes := map[string]hashState{}
	var lat []time.Duration
	var peak uint64
	var mu sync.Mutex
	exited := 0
	for exited < sandboxes*procs {
		m := c.next(10*time.Minute, func(*Message) bool { return true })
		switch m.Method {
		case MethodProcessOutput:
			var p ProcessOutputParams
			json.Unmarshal(m.Params, &p)
			h := hashes[p.ProcessID]
			if h.h == nil {
				h.h = sha256.New()
			}
			if p.Stream == "stdout" {
				h.h.Write(p.Chunk)
				h.n += int64(len(p.Chunk))
			} else {
				h.stderr = append(h.stderr, p.Chunk...)
			}
			hashes[p.ProcessID] = h
		case MethodProcessExited:
			exited++
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
		case MethodGateCall:
			c.respond(m, GateCallResult{Stdout: []byte("ok\n")}, nil)
		}
	}
	elapsed := time.Since(start)
	for id, h := range hashes {
		got := hex.EncodeToString(h.h.Sum(nil))
		if h.n != mb<<20 || !strings.Contains(string(h.stderr), got) {
			t.Errorf("%s: %d bytes, hash %s, inside %q", id, h.n, got, h.stderr)
		}
	}
	// Gate latency: from the host noticing a call to its answer written
	// (the audit record's duration), the client's answer included.
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var rec struct {
			Gate string  `json:"gate"`
			MS   float64 `json:"duration_ms"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Gate == "tick" {
			lat = append(lat, time.Duration(rec.MS*float64(time.Millisecond)))
		}
	}
	if len(lat) != sandboxes*procs*calls {
		t.Errorf("%d gate calls recorded, want %d", len(lat), sandboxes*procs*calls)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		return
	}
	t.Logf("gate latency p50 %v p99 %v", lat[len(lat)/2], lat[len(lat)*99/100])
	t.Logf("%d processes × %d MB in %v (%.0f MB/s); %d gate calls; peak heap %d MiB",
		sandboxes*procs, mb, elapsed.Round(time.Millisecond), float64(sandboxes*procs*mb)/elapsed.Seconds(), len(lat), peak>>20)
}

type hashState struct {
	h interface {
		Write([]byte) (int, error)
		Sum([]byte) []byte
	}
	n      int64
	stderr []byte
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
