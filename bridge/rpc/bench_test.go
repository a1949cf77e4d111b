package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
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
		if _, err := local.New().Run(context.Background(), &sandbox.Spec{Command: []string{"true"}, Workspace: ws}); err != nil {
			b.Fatal(err)
		}
		backend += time.Since(tb)
		t1 := time.Now()
		id := fmt.Sprint("p", i)
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb", Argv: []string{"true"}}, nil)
		if o := c.Collect(id, time.Minute, nil); o.Exited.ExitCode != 0 {
			b.Fatalf("exit %+v", o.Exited)
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
	c.Call(MethodGateRegister, GateRegisterParams{Name: "rtgate"}, nil)
	c.openSandbox("sb", "local", false)
	const batch = 20
	loop := func(id, gate string) time.Duration {
		t0 := time.Now()
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb",
			Argv: []string{"sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do %s >/dev/null || exit 1; i=$((i+1)); done", batch, gate)}}, nil)
		for {
			m := c.Next(time.Minute, func(m *Message) bool {
				return m.Method == MethodProcessExited || m.Method == MethodGateCall
			})
			if m.Method == MethodGateCall {
				c.Respond(m, GateCallResult{Stdout: []byte("ok\n")}, nil)
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
