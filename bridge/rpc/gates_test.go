package rpc_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
)

// nextRequest is the next server request of method, and its params.
func (c *client) nextRequest(method string) (*Message, json.RawMessage) {
	c.t.Helper()
	m := c.Next(30*time.Second, rpctest.IsMethod(method))
	return m, m.Params
}

func TestRuntimeGate(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			c := newClient(t, testOptions(t))
			c.Call(MethodGateRegister, GateRegisterParams{Name: "lookup", Summary: "look a key up", Usage: "lookup KEY", Stdin: "if-no-args"}, nil)
			_, open := c.openSandbox("sb", backend, false)
			var docs []GateDoc
			c.Call(MethodGateList, struct{}{}, &docs)
			kinds := map[string]string{}
			for _, d := range docs {
				kinds[d.Name] = d.Kind
			}
			if kinds["lookup"] != KindRuntime || kinds["read_file"] != "builtin" {
				t.Fatalf("gate/list kinds: %v", kinds)
			}

			// Arguments, cwd and ids reach the client; its answer reaches
			// the caller byte for byte, with its exit code.
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb",
				Argv: []string{"sh", "-c", "mkdir -p /tmp/x 2>/dev/null; lookup 'a b' c; echo rc=$?; printf 'in-put' | lookup; echo rc=$?"}}, nil)
			m, raw := c.nextRequest(MethodGateCall)
			var gc GateCallParams
			json.Unmarshal(raw, &gc)
			if gc.Gate != "lookup" || strings.Join(gc.Args, "|") != "a b|c" || gc.ProcessID != "p" || gc.SandboxID != "sb" || gc.Stdin != nil {
				t.Fatalf("gate/call: %+v", gc)
			}
			if gc.Cwd != open.WorkspaceInside || gc.DeadlineMs < time.Now().UnixMilli() {
				t.Fatalf("gate/call cwd %q (want %q) deadline %d", gc.Cwd, open.WorkspaceInside, gc.DeadlineMs)
			}
			c.Respond(m, GateCallResult{ExitCode: 4, Stdout: []byte("val\x00ue\n"), Stderr: []byte("warn\n")}, nil)
			m, raw = c.nextRequest(MethodGateCall)
			json.Unmarshal(raw, &gc)
			if string(gc.Stdin) != "in-put" || len(gc.Args) != 0 {
				t.Fatalf("second gate/call: %+v", gc)
			}
			c.Respond(m, GateCallResult{ExitCode: 0, Stdout: []byte("from-stdin\n")}, nil)
			o := c.Collect("p", 30*time.Second, nil)
			if string(o.Stdout) != "val\x00ue\nrc=4\nfrom-stdin\nrc=0\n" || !strings.Contains(string(o.Stderr), "warn") {
				t.Fatalf("stdout %q stderr %q", o.Stdout, o.Stderr)
			}

			// An error response: exit 1 with the message.
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "e", SandboxID: "sb", Argv: []string{"sh", "-c", "lookup x; echo rc=$?"}}, nil)
			m, _ = c.nextRequest(MethodGateCall)
			c.Respond(m, nil, &Error{Code: -32000, Message: "key x unknown"})
			o = c.Collect("e", 30*time.Second, nil)
			if string(o.Stdout) != "rc=1\n" || !strings.Contains(string(o.Stderr), "key x unknown") {
				t.Fatalf("error answer: stdout %q stderr %q", o.Stdout, o.Stderr)
			}

			// Unregistered: the command is gone from the sandbox.
			c.Call(MethodGateUnregister, GateUnregisterParams{Name: "lookup"}, nil)
			o = c.Run("sb", "gone", nil, "sh", "-c", "lookup x; echo rc=$?")
			if !strings.Contains(string(o.Stdout), "rc=127") {
				t.Fatalf("after unregister: %q %q", o.Stdout, o.Stderr)
			}
		})
	}
}

// A gate streams with gate/output before it answers: the caller sees the
// first chunk while the call still waits.
func TestRuntimeGateStreams(t *testing.T) {
	c := newClient(t, testOptions(t))
	c.Call(MethodGateRegister, GateRegisterParams{Name: "slow"}, nil)
	c.openSandbox("sb", "local", false)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sh", "-c", "slow | while read l; do echo got:$l; done"}}, nil)
	m, raw := c.nextRequest(MethodGateCall)
	var gc GateCallParams
	json.Unmarshal(raw, &gc)
	c.Notify(MethodGateOutput, GateOutputParams{CallID: gc.CallID, Stream: "stdout", Chunk: []byte("first\n")})
	out := c.Next(10*time.Second, rpctest.IsMethod(MethodProcessOutput))
	var p ProcessOutputParams
	json.Unmarshal(out.Params, &p)
	if string(p.Chunk) != "got:first\n" {
		t.Fatalf("first streamed line: %q", p.Chunk)
	}
	c.Respond(m, GateCallResult{Stdout: []byte("last\n")}, nil)
	o := c.Collect("p", 30*time.Second, nil)
	if string(o.Stdout) != "got:last\n" || o.Exited.ExitCode != 0 {
		t.Fatalf("rest: %q %+v", o.Stdout, o.Exited)
	}
	// Output for a call already answered is dropped, not an error.
	c.Notify(MethodGateOutput, GateOutputParams{CallID: gc.CallID, Stream: "stdout", Chunk: []byte("late\n")})
	var list ProcessListResult
	c.Call(MethodProcessList, struct{}{}, &list)
}

// A client that never answers: the caller gets exit 1 after the gate's
// deadline, and the server sends $/cancelRequest for the call. A caller
// that goes away (killed) cancels the call the same way.
func TestRuntimeGateNoAnswerAndCallerGone(t *testing.T) {
	c := newClient(t, testOptions(t))
	c.Call(MethodGateRegister, GateRegisterParams{Name: "mute", TimeoutMs: 400}, nil)
	c.openSandbox("sb", "local", false)
	start := time.Now()
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sh", "-c", "mute; echo rc=$?"}}, nil)
	m, _ := c.nextRequest(MethodGateCall)
	cancel, raw := c.nextRequest(MethodCancelRequest)
	var cp CancelParams
	json.Unmarshal(raw, &cp)
	if string(cp.ID) != string(m.ID) {
		t.Fatalf("$/cancelRequest id %s, want %s", cp.ID, m.ID)
	}
	_ = cancel
	o := c.Collect("p", 30*time.Second, nil)
	if string(o.Stdout) != "rc=1\n" || !strings.Contains(string(o.Stderr), "did not answer") {
		t.Fatalf("stdout %q stderr %q", o.Stdout, o.Stderr)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 10*time.Second {
		t.Fatalf("answered after %v for a 400ms deadline", d)
	}
	// A late answer is ignored.
	c.Respond(m, GateCallResult{Stdout: []byte("late")}, nil)

	// The caller goes away: timeout 1 kills the wrapper.
	c.Call(MethodGateRegister, GateRegisterParams{Name: "slow", TimeoutMs: 60000}, nil)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "q", SandboxID: "sb", Argv: []string{"sh", "-c", "timeout -s TERM 0.5 slow; echo rc=$?"}}, nil)
	m, _ = c.nextRequest(MethodGateCall)
	_, raw = c.nextRequest(MethodCancelRequest)
	json.Unmarshal(raw, &cp)
	if string(cp.ID) != string(m.ID) {
		t.Fatalf("$/cancelRequest id %s, want %s", cp.ID, m.ID)
	}
	o = c.Collect("q", 30*time.Second, nil)
	if !strings.Contains(string(o.Stdout), "rc=124") {
		t.Fatalf("caller gone: %q %q", o.Stdout, o.Stderr)
	}
}

func TestApproval(t *testing.T) {
	c := newClient(t, testOptions(t))
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)
	script := "deploy prod; echo rc=$?"
	// Deny: the gate does not run (no gate/call), exit 126 with the reason.
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "d", SandboxID: "sb", Argv: []string{"sh", "-c", script}}, nil)
	m, raw := c.nextRequest(MethodApprovalRequest)
	var ap ApprovalRequestParams
	json.Unmarshal(raw, &ap)
	if ap.Gate != "deploy" || strings.Join(ap.Args, " ") != "prod" || ap.ProcessID != "d" || ap.SandboxID != "sb" || ap.CallID == "" {
		t.Fatalf("approval/request: %+v", ap)
	}
	c.Respond(m, ApprovalResult{Decision: DecisionDeny, Reason: "not on fridays"}, nil)
	o := c.Collect("d", 30*time.Second, nil)
	if string(o.Stdout) != "rc=126\n" || !strings.Contains(string(o.Stderr), "not on fridays") {
		t.Fatalf("deny: %q %q", o.Stdout, o.Stderr)
	}
	// An error answer and an unknown decision deny too.
	for i, answer := range []func(*Message){
		func(m *Message) { c.Respond(m, nil, &Error{Code: -32000, Message: "boom"}) },
		func(m *Message) { c.Respond(m, ApprovalResult{Decision: "maybe"}, nil) },
	} {
		id := fmt.Sprint("x", i)
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb", Argv: []string{"sh", "-c", script}}, nil)
		m, _ := c.nextRequest(MethodApprovalRequest)
		answer(m)
		if o := c.Collect(id, 30*time.Second, nil); string(o.Stdout) != "rc=126\n" {
			t.Fatalf("answer %d: %q %q", i, o.Stdout, o.Stderr)
		}
	}
	// allowForSession: asked once, then the gate runs without asking.
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "a", SandboxID: "sb", Argv: []string{"sh", "-c", "deploy 1; deploy 2; echo done"}}, nil)
	m, _ = c.nextRequest(MethodApprovalRequest)
	c.Respond(m, ApprovalResult{Decision: DecisionAllowForSession}, nil)
	for i := 0; i < 2; i++ {
		m, raw := c.Next(30*time.Second, func(m *Message) bool {
			if m.Method == MethodApprovalRequest {
				t.Fatalf("asked again after allowForSession")
			}
			return m.Method == MethodGateCall
		}), json.RawMessage(nil)
		_ = raw
		c.Respond(m, GateCallResult{Stdout: []byte("ok\n")}, nil)
	}
	if o := c.Collect("a", 30*time.Second, nil); string(o.Stdout) != "ok\nok\ndone\n" {
		t.Fatalf("allowForSession: %q %q", o.Stdout, o.Stderr)
	}
}

func TestGateRegisterConflicts(t *testing.T) {
	c := newClient(t, testOptions(t))
	if e := c.CallErr(MethodGateRegister, GateRegisterParams{Name: "read_file"}); e == nil || e.Code != CodeConflict {
		t.Fatalf("shadowing a built-in: %+v", e)
	}
	c.Call(MethodGateRegister, GateRegisterParams{Name: "mine", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"the query"}},"required":["q"]}`)}, nil)
	if e := c.CallErr(MethodGateRegister, GateRegisterParams{Name: "mine"}); e == nil || e.Code != CodeConflict {
		t.Fatalf("registered twice: %+v", e)
	}
	if e := c.CallErr(MethodGateRegister, GateRegisterParams{Name: "s", InputSchema: json.RawMessage(`{"type":"array"}`)}); e == nil || e.Code != CodeInvalidParams {
		t.Fatalf("array schema: %+v", e)
	}
	var docs []GateDoc
	c.Call(MethodGateList, struct{}{}, &docs)
	for _, d := range docs {
		if d.Name == "mine" {
			if d.Usage != "mine Q" || len(d.Params) != 1 || !d.Params[0].Required || d.Params[0].Description != "the query" || len(d.InputSchema) == 0 {
				t.Fatalf("mine: %+v", d)
			}
			return
		}
	}
	t.Fatal("mine not listed")
}

// Pending calls are capped: past maxPendingGateCalls, a call fails at
// once with exit 1 instead of queueing without bound.
func TestPendingCallsCap(t *testing.T) {
	opts := testOptions(t)
	opts.MaxPendingCalls = 2
	c := newClient(t, opts)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "hold"}, nil)
	c.openSandbox("sb", "local", false)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb",
		Argv: []string{"sh", "-c", "hold & hold & sleep 0.5; wait; echo rc=$?"}}, nil)
	a, _ := c.nextRequest(MethodGateCall)
	b, _ := c.nextRequest(MethodGateCall)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "third", SandboxID: "sb", Argv: []string{"sh", "-c", "hold; echo rc=$?"}}, nil)
	o := c.Collect("third", 30*time.Second, nil)
	if string(o.Stdout) != "rc=1\n" || !strings.Contains(string(o.Stderr), "maxPendingGateCalls") {
		t.Fatalf("third call: %q %q", o.Stdout, o.Stderr)
	}
	c.Respond(a, GateCallResult{}, nil)
	c.Respond(b, GateCallResult{}, nil)
	c.Collect("p", 30*time.Second, nil)
}

// A gate registered while a sandbox is still opening is a command in it
// all the same. (The interleaving is up to the scheduler: under -race this
// may also catch an unlocked write of the sandbox's registry, but it did
// not reliably against the old code.)
func TestGateRegisteredWhileSandboxOpens(t *testing.T) {
	for i := 0; i < 5; i++ {
		c := newClient(t, testOptions(t))
		opened := make(chan struct{})
		go func() {
			defer close(opened)
			c.openSandbox("sb", "local", false)
		}()
		c.Call(MethodGateRegister, GateRegisterParams{Name: fmt.Sprint("late", i)}, nil)
		<-opened
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sh", "-c", fmt.Sprintf("late%d; echo rc=$?", i)}}, nil)
		o := c.Collect("p", 30*time.Second, func(GateCallParams) GateCallResult { return GateCallResult{} })
		if string(o.Stdout) != "rc=0\n" {
			t.Fatalf("round %d: %q %q", i, o.Stdout, o.Stderr)
		}
		c.close()
	}
}

// exactCall is what a client that follows docs/json.md reads from
// gate/call or approval/request params: the arguments (and cwd) exactly,
// from the string fields and their base64 siblings. (Decoded here by hand,
// not with the params' own methods, so the test reads the wire.)
type exactCall struct {
	Args       []string  `json:"args"`
	ArgsBase64 []*[]byte `json:"argsBase64"`
	Cwd        string    `json:"cwd"`
	CwdBase64  *[]byte   `json:"cwdBase64"`
}

func (e exactCall) args(t *testing.T) []string {
	t.Helper()
	if e.ArgsBase64 == nil {
		return e.Args
	}
	if len(e.ArgsBase64) != len(e.Args) {
		t.Fatalf("argsBase64 has %d entries for %d args", len(e.ArgsBase64), len(e.Args))
	}
	out := make([]string, len(e.Args))
	for i, a := range e.Args {
		out[i] = a
		if b := e.ArgsBase64[i]; b != nil {
			out[i] = string(*b)
		}
	}
	return out
}

func (e exactCall) cwd() string {
	if e.CwdBase64 != nil {
		return string(*e.CwdBase64)
	}
	return e.Cwd
}

// Arguments that are not UTF-8 reach a runtime gate, and its approval,
// exactly: \xff and \xfe arrive as different bytes (JSON alone would turn
// both into U+FFFD while the gate was meant to get the raw bytes), and so
// does a caller's working directory that is not UTF-8. An argument typed
// as the four characters \xff stays those four characters.
func TestRuntimeGateArgsNotUTF8(t *testing.T) {
	for _, backend := range testBackends(t) {
		t.Run(backend, func(t *testing.T) {
			c := newClient(t, testOptions(t))
			c.Call(MethodGateRegister, GateRegisterParams{Name: "lookup"}, nil)
			c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
			c.openSandbox("sb", backend, false)
			c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sh", "-c",
				`d="$TMPDIR/$(printf 'c\376')"; mkdir -p "$d" && cd "$d" && lookup "$(printf 'a\377')" ok && lookup "$(printf 'a\376')" '\xff' && deploy "$(printf '\377')"; echo rc=$?`}}, nil)
			var got [][]string
			var cwd string
			for range 2 {
				m, raw := c.nextRequest(MethodGateCall)
				var e exactCall
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatal(err)
				}
				got = append(got, e.args(t))
				cwd = e.cwd()
				c.Respond(m, GateCallResult{}, nil)
			}
			if got[0][0] != "a\xff" || got[1][0] != "a\xfe" || got[0][1] != "ok" || got[1][1] != `\xff` {
				t.Fatalf("the runtime got %q and %q; want \"a\\xff\" ok, \"a\\xfe\" \\xff", got[0], got[1])
			}
			if !strings.HasSuffix(cwd, "/c\xfe") {
				t.Fatalf("cwd %q; want it to end in c\\xfe", cwd)
			}
			m, raw := c.nextRequest(MethodApprovalRequest)
			var ap exactCall
			json.Unmarshal(raw, &ap)
			if a := ap.args(t); len(a) != 1 || a[0] != "\xff" {
				t.Fatalf("approval/request args %q; want [\"\\xff\"]", a)
			}
			c.Respond(m, ApprovalResult{Decision: DecisionDeny}, nil)
			if o := c.Collect("p", 30*time.Second, nil); string(o.Stdout) != "rc=126\n" {
				t.Fatalf("stdout %q stderr %q", o.Stdout, o.Stderr)
			}
			// submit's answer in process/exited, the same way.
			o := c.Run("sb", "s", nil, "sh", "-c", `submit "$(printf 'x\376')"`)
			if a := o.Exited.ExactAnswer(); a == nil || *a != "x\xfe" {
				t.Fatalf("answer %v (base64 %q)", a, o.Exited.AnswerBase64)
			}
		})
	}
}

// A runtime gate registered without "stdin" gets what is piped into it
// when called without arguments (if-no-args, the protocol's default):
// models pipe into tools all the time. "none" must be asked for.
func TestRuntimeGateStdinDefault(t *testing.T) {
	c := newClient(t, testOptions(t))
	c.Call(MethodGateRegister, GateRegisterParams{Name: "g"}, nil)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deaf", Stdin: "none"}, nil)
	var docs []GateDoc
	c.Call(MethodGateList, struct{}{}, &docs)
	stdin := map[string]string{}
	for _, d := range docs {
		stdin[d.Name] = d.Stdin
	}
	if stdin["g"] != "if-no-args" || stdin["deaf"] != "none" {
		t.Errorf("gate/list: stdin g %q, deaf %q; want if-no-args, none", stdin["g"], stdin["deaf"])
	}
	c.openSandbox("sb", "local", false)
	for _, tc := range []struct {
		gate string
		want *string
	}{{"g", ptr("hello\n")}, {"deaf", nil}} {
		id := "p-" + tc.gate
		c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: "sb", Argv: []string{"sh", "-c", "echo hello | " + tc.gate}}, nil)
		m, raw := c.nextRequest(MethodGateCall)
		var gc GateCallParams
		json.Unmarshal(raw, &gc)
		var got *string
		if gc.Stdin != nil {
			s := string(gc.Stdin)
			got = &s
		}
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: the gate got stdin %v, want %v", tc.gate, show(got), show(tc.want))
		}
		c.Respond(m, GateCallResult{}, nil)
		c.Collect(id, 30*time.Second, nil)
	}
}

func ptr(s string) *string { return &s }

func show(s *string) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%q", *s)
}
