package rpc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// With the local backend a command can read a secret gatebridge holds;
// the client sees none of it: not in the command's output, and not in a
// runtime gate's gate/call (arguments, stdin, cwd) or an approval/request.
func TestRuntimeGateCallRedacted(t *testing.T) {
	const secret = "ghp_0123456789abcdefSECRET"
	opts := testOptions(t)
	red := secrets.NewRedactor()
	red.Add("gh", secret)
	opts.Bridge.Redact = red
	opts.Approvals.Redact = red.String // as serve wires both
	c := newClient(t, opts)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "lookup", Stdin: "always"}, nil)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", local.Name, true)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Argv: []string{"sh", "-c",
		`s=` + secret + `; mkdir -p "$s" && cd "$s" && echo "$s" | lookup "x$s" && deploy "$s"; echo rc=$?`}}, nil)
	m, raw := c.nextRequest(MethodGateCall)
	var p GateCallParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) || strings.Contains(string(p.Stdin), secret) || !strings.Contains(string(raw), "[secret:gh]") {
		t.Errorf("gate/call holds the secret: %s (stdin %q)", raw, p.Stdin)
	}
	c.Respond(m, GateCallResult{}, nil)
	m, raw = c.nextRequest(MethodApprovalRequest)
	if strings.Contains(string(raw), secret) {
		t.Errorf("approval/request holds the secret: %s", raw)
	}
	c.Respond(m, ApprovalResult{Decision: DecisionDeny}, nil)
	o := c.Collect("p", 30*time.Second, nil)
	if string(o.Stdout) != "rc=126\n" {
		t.Fatalf("stdout %q stderr %q", o.Stdout, o.Stderr)
	}
}
