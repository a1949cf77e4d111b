package rpc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
)

// process/start with tty: a terminal (none without), its size, a
// process/resize the command sees, process/write typed at it, its exit
// code and one stream; and arg0 where the backend can.
func TestProcessTTY(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			c := newClient(t, testOptions(t))
			c.openSandbox("sb", backend, false)
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "plain", SandboxID: "sb", Argv: []string{"sh", "-c", "test -t 0 && echo tty || echo notty"}}, nil)
			if o := c.Collect("plain", 30*time.Second, nil); string(o.Stdout) != "notty\n" {
				t.Fatalf("without tty: %q", o.Stdout)
			}
			if e := c.CallErr(MethodProcessResize, ProcessResizeParams{ProcessID: "plain", Rows: 10, Cols: 10}); e == nil || e.Code != CodeInvalidParams {
				t.Errorf("resize without tty: %+v, want -32602", e)
			}
			if e := c.CallErr(MethodProcessStart, ProcessStartParams{ProcessID: "zero", SandboxID: "sb", Argv: []string{"true"}, TTY: &TTYSize{Rows: 0, Cols: 80}}); e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "tty.rows") {
				t.Errorf("tty rows 0: %+v, want -32602 naming tty.rows", e)
			}

			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "t", SandboxID: "sb", Stdin: true, TTY: &TTYSize{Rows: 20, Cols: 70},
				Argv: []string{"sh", "-c", `tty -s && echo tty; stty size; echo to-stderr >&2; trap 'echo "winch $(stty size)"; W=1' WINCH
stty -echo; echo ready; while [ -z "$W" ]; do sleep 0.05; done; read line; echo "got $line"; exit 7`}}, nil)
			var seen strings.Builder
			for !strings.Contains(seen.String(), "ready") {
				m := c.Next(30*time.Second, rpctest.IsMethod(MethodProcessOutput))
				var out ProcessOutputParams
				if err := json.Unmarshal(m.Params, &out); err != nil {
					t.Fatal(err)
				}
				if out.Stream != "stdout" {
					t.Errorf("a chunk on %s", out.Stream)
				}
				seen.Write(out.Chunk)
			}
			c.Call(MethodProcessResize, ProcessResizeParams{ProcessID: "t", Rows: 40, Cols: 100}, nil)
			c.Call(MethodProcessWrite, ProcessWriteParams{ProcessID: "t", Chunk: []byte("hello\n")}, nil)
			o := c.Collect("t", 30*time.Second, nil)
			got := strings.ReplaceAll(seen.String()+string(o.Stdout), "\r\n", "\n")
			if want := "tty\n20 70\nto-stderr\nready\nwinch 40 100\ngot hello\n"; got != want || o.Exited.ExitCode != 7 || len(o.Stderr) != 0 {
				t.Errorf("exit %d stdout %q stderr %q; want 7 and %q", o.Exited.ExitCode, got, o.Stderr, want)
			}
			if e := c.CallErr(MethodProcessResize, ProcessResizeParams{ProcessID: "t", Rows: 10, Cols: 10}); e == nil || e.Code != CodeNotFound {
				t.Errorf("resize after the exit: %+v, want not found", e)
			}

			// arg0: the command sees it as its argv[0]; a backend that
			// cannot refuses it, naming itself.
			ps := ProcessStartParams{ProcessID: "a0", SandboxID: "sb", Arg0: "my-arg0", Argv: []string{"sh", "-c", `tr '\0' ' ' < /proc/$$/cmdline; echo`}}
			if backend == bwrap.Name && sandbox.Arg0Support(bwrap.New()) != nil {
				if e := c.CallErr(MethodProcessStart, ps); e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, `"bwrap"`) {
					t.Errorf("arg0 on bwrap without --argv0: %+v, want -32602 naming bwrap", e)
				}
				return
			}
			c.Call(MethodProcessStart, ps, nil)
			if o := c.Collect("a0", 30*time.Second, nil); !strings.HasPrefix(string(o.Stdout), "my-arg0 -c ") {
				t.Errorf("arg0: cmdline %q", o.Stdout)
			}
		})
	}
}
