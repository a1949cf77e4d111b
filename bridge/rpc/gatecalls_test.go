package rpc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/approval"
	. "github.com/gatebridge/gatebridge/bridge/rpc"

	"github.com/gatebridge/gatebridge/gates/secrets"
)

// gateCallsOf runs argv in a fresh local sandbox with reportGateCalls and
// returns the process/gateCall notifications and the exit, each checked
// for the secret value.
func gateCallsOf(t *testing.T, opts Options, report bool, env map[string]string, script string) ([]ProcessGateCallParams, ProcessExitedParams, string) {
	t.Helper()
	c := newClient(t, opts)
	c.openSandbox("sb", "local", false)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Env: env, ReportGateCalls: report,
		Argv: []string{"sh", "-c", script}}, nil)
	var calls []ProcessGateCallParams
	var raw strings.Builder
	for {
		m := c.Next(30*time.Second, func(m *Message) bool {
			return m.Method == MethodProcessGateCall || m.Method == MethodProcessExited
		})
		raw.Write(m.Params)
		if m.Method == MethodProcessExited {
			var ex ProcessExitedParams
			if err := json.Unmarshal(m.Params, &ex); err != nil {
				t.Fatal(err)
			}
			return calls, ex, raw.String()
		}
		var p ProcessGateCallParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, p)
	}
}

// A process that calls two gates, one failing: process/exited lists both
// (issue 31), with a non-UTF-8 argument's exact bytes in argsBase64 and a
// secret value redacted; with reportGateCalls each also comes as a
// process/gateCall before the exit.
func TestProcessGateCallsReported(t *testing.T) {
	const value = "ghp_gatecalls0123456789secret"
	red := secrets.NewRedactor()
	red.Add("gh", value)
	opts := testOptions(t)
	opts.Bridge.Redact = red
	calls, ex, raw := gateCallsOf(t, opts, true, map[string]string{"TOKEN": value},
		`list_dir "$(printf 'caf\351')" >/dev/null 2>&1; list_dir . >/dev/null; read_file "$TOKEN" 2>/dev/null; echo done`)
	if strings.Contains(raw, value) {
		t.Fatalf("the secret reached the client: %s", raw)
	}
	if ex.ExitCode != 0 || len(ex.GateCalls) != 3 || ex.GateCallsDropped != 0 {
		t.Fatalf("exited %+v", ex)
	}
	bad, ok, secret := ex.GateCalls[0], ex.GateCalls[1], ex.GateCalls[2]
	args, err := bad.ExactArgs()
	if bad.Gate != "list_dir" || err != nil || len(args) != 1 || args[0] != "caf\xe9" || bad.ExitCode == 0 || bad.Decision != "ran" {
		t.Errorf("non-UTF-8 call %+v (exact args %q, %v)", bad, args, err)
	}
	if ok.Gate != "list_dir" || ok.ExitCode != 0 || ok.Decision != "ran" || ok.ArgsBase64 != nil || ok.DurationMs <= 0 {
		t.Errorf("ok call %+v", ok)
	}
	if secret.Gate != "read_file" || secret.ExitCode == 0 || strings.Join(secret.Args, " ") != "[secret:gh]" || secret.Error == "" || secret.BytesOut == 0 {
		t.Errorf("failing call %+v", secret)
	}
	if len(calls) != 3 || calls[0].ProcessID != "p" || calls[2].Call.Gate != "read_file" || calls[1].Call.CallID != ok.CallID || !strings.HasPrefix(ok.CallID, "p:") {
		t.Errorf("process/gateCall notifications %+v", calls)
	}
}

// limits.maxGateCalls caps process/exited's list, the rest counted;
// without reportGateCalls no process/gateCall is sent.
func TestProcessGateCallsCap(t *testing.T) {
	opts := testOptions(t)
	opts.MaxGateCalls = 2
	calls, ex, _ := gateCallsOf(t, opts, false, nil, `for i in 1 2 3 4; do list_dir . >/dev/null; done`)
	if len(ex.GateCalls) != 2 || ex.GateCallsDropped != 2 || len(calls) != 0 {
		t.Fatalf("exited %+v, %d notifications", ex, len(calls))
	}
	var res InitializeResult
	c := newUninitialized(t, opts)
	c.Call(MethodInitialize, InitializeParams{ProtocolVersion: 1}, &res)
	if res.Limits.MaxGateCalls != 2 {
		t.Errorf("limits.maxGateCalls %d", res.Limits.MaxGateCalls)
	}
}

// Under serve, process/exited's gateCalls say who decided a call of a
// gate that needs approval: the runtime, which answered approval/request
// (allow, with a grant; deny), then the grant it gave, at the next call.
func TestProcessGateCallsDecidedBy(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals = approval.Config{Store: grantsStore(t)}
	c := connect(t, NewServer(opts))
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)

	m, p := c.ask("sb", "a", "deploy prod; deploy staging; echo rc=$?")
	c.Respond(m, ApprovalResult{Decision: DecisionAllow, Grant: offer(t, p, func(o ApprovalGrant) bool { return o.Lifetime == "always" && o.Scope == ScopeExact })}, nil)
	c.gateCallsOnly(1, "")
	m, _ = c.nextRequest(MethodApprovalRequest)
	c.Respond(m, ApprovalResult{Decision: DecisionDeny}, nil)
	ex := c.Collect("a", 30*time.Second, nil).Exited
	if len(ex.GateCalls) != 2 {
		t.Fatalf("gateCalls %+v", ex.GateCalls)
	}
	if g := ex.GateCalls[0]; g.Decision != "ran" || g.DecidedBy != approval.ByRuntime {
		t.Errorf("allowed by the runtime: %+v", g)
	}
	if g := ex.GateCalls[1]; g.Decision != "denied" || g.ExitCode != 126 || g.DecidedBy != approval.ByRuntime {
		t.Errorf("denied by the runtime: %+v", g)
	}

	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "b", SandboxID: "sb", Argv: []string{"sh", "-c", "deploy prod"}}, nil)
	c.gateCallsOnly(1, "the grant was not used")
	ex = c.Collect("b", 30*time.Second, nil).Exited
	if len(ex.GateCalls) != 1 || ex.GateCalls[0].Decision != "ran" || ex.GateCalls[0].DecidedBy != approval.ByGrant {
		t.Fatalf("allowed by the grant: %+v", ex.GateCalls)
	}

	// A gate that needs no approval: no one decided.
	c.Call(MethodGateRegister, GateRegisterParams{Name: "lookup"}, nil)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "c", SandboxID: "sb", Argv: []string{"sh", "-c", "lookup x"}}, nil)
	c.gateCallsOnly(1, "lookup needs no approval")
	ex = c.Collect("c", 30*time.Second, nil).Exited
	if len(ex.GateCalls) != 1 || ex.GateCalls[0].DecidedBy != "" {
		t.Fatalf("no approval: %+v", ex.GateCalls)
	}
}
