package rpc_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	. "github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/bridge/rpc/rpctest"
)

// grantsStore is a grants file of the test's own (not under the test's
// temp dir, which traversableTempDir opens to everyone).
func grantsStore(t *testing.T) *approval.Store {
	t.Helper()
	dir, err := os.MkdirTemp("", "grants")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := approval.NewStore(filepath.Join(dir, "gatebridge", approval.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// connect serves one more connection of srv and initializes it.
func connect(t *testing.T, srv *Server) *client {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	c := &client{Client: rpctest.New(t, cr, cw), t: t, w: cw, done: make(chan error, 1)}
	go func() {
		c.done <- srv.Serve(context.Background(), sr, sw)
		sw.Close()
	}()
	t.Cleanup(func() { c.close() })
	c.Initialize()
	return c
}

// ask starts script as process id in sandbox sb and returns the
// approval/request it causes.
func (c *client) ask(sb, id, script string) (*Message, ApprovalRequestParams) {
	c.t.Helper()
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: id, SandboxID: sb, Argv: []string{"sh", "-c", script}}, nil)
	m, raw := c.nextRequest(MethodApprovalRequest)
	var p ApprovalRequestParams
	if err := json.Unmarshal(raw, &p); err != nil {
		c.t.Fatal(err)
	}
	return m, p
}

// gateCallsOnly answers n gate/calls with "ok", failing on an
// approval/request meanwhile.
func (c *client) gateCallsOnly(n int, why string) {
	c.t.Helper()
	for range n {
		m := c.Next(30*time.Second, func(m *Message) bool {
			if m.Method == MethodApprovalRequest {
				c.t.Fatalf("asked again: %s", why)
			}
			return m.Method == MethodGateCall
		})
		c.Respond(m, GateCallResult{Stdout: []byte("ok\n")}, nil)
	}
}

func offer(t *testing.T, p ApprovalRequestParams, pred func(ApprovalGrant) bool) *ApprovalGrant {
	t.Helper()
	for _, o := range p.Offers {
		if pred(o) {
			return &o
		}
	}
	t.Fatalf("no such offer in %+v", p.Offers)
	return nil
}

// A grant given over the protocol is kept in the grants file as a
// person's, used at the next call without asking (also on another
// connection), listed in words; removed from the file by another
// process, it stops matching at once in the running server.
func TestApprovalGrantOverProtocol(t *testing.T) {
	store := grantsStore(t)
	opts := testOptions(t)
	opts.Approvals = approval.Config{Store: store}
	srv := NewServer(opts)
	c := connect(t, srv)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)

	m, p := c.ask("sb", "a", "deploy prod; echo rc=$?")
	if p.Gate != "deploy" || len(p.Offers) < 2 || p.Offers[0].Scope != ScopeAny || p.Offers[0].Lifetime != "session" ||
		!strings.Contains(p.Offers[0].Description, `"deploy"`) {
		t.Fatalf("offers %+v", p.Offers)
	}
	always := offer(t, p, func(o ApprovalGrant) bool { return o.Lifetime == "always" && o.Scope == ScopeExact })
	if strings.Join(always.Exact, " ") != "prod" {
		t.Fatalf("exact offer %+v", always)
	}
	c.Respond(m, ApprovalResult{Decision: DecisionAllow, Grant: always}, nil)
	c.gateCallsOnly(1, "")
	if o := c.Collect("a", 30*time.Second, nil); string(o.Stdout) != "ok\nrc=0\n" {
		t.Fatalf("allowed: %q %q", o.Stdout, o.Stderr)
	}
	list, err := store.List(time.Now())
	if err != nil || len(list) != 1 || strings.Join(list[0].Exact, " ") != "prod" || list[0].Lifetime != approval.LifeAlways {
		t.Fatalf("grants file: %+v, %v", list, err)
	}
	if d := list[0].Describe(); !strings.Contains(d, `exactly the arguments "prod"`) {
		t.Fatalf("in words: %q", d)
	}

	// The next call runs without asking; other arguments still ask.
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "b", SandboxID: "sb", Argv: []string{"sh", "-c", "deploy prod; deploy staging; echo rc=$?"}}, nil)
	c.gateCallsOnly(1, "the grant was not used")
	m, _ = c.nextRequest(MethodApprovalRequest)
	c.Respond(m, ApprovalResult{Decision: DecisionDeny}, nil)
	if o := c.Collect("b", 30*time.Second, nil); string(o.Stdout) != "ok\nrc=126\n" {
		t.Fatalf("second run: %q %q", o.Stdout, o.Stderr)
	}

	// Another connection of the server: the stored grant holds there too.
	c2 := connect(t, srv)
	c2.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c2.openSandbox("sb2", "local", false)
	c2.Call(MethodProcessStart, ProcessStartParams{ProcessID: "c", SandboxID: "sb2", Argv: []string{"sh", "-c", "deploy prod; echo rc=$?"}}, nil)
	c2.gateCallsOnly(1, "the stored grant was not used on another connection")
	c2.Collect("c", 30*time.Second, nil)

	// Removed by `gatebridge grants rm` (another process): asked again.
	other, err := approval.NewStore(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Remove(list[0].ID); err != nil {
		t.Fatal(err)
	}
	m, _ = c.ask("sb", "d", "deploy prod; echo rc=$?")
	c.Respond(m, ApprovalResult{Decision: DecisionDeny, Reason: "revoked"}, nil)
	if o := c.Collect("d", 30*time.Second, nil); string(o.Stdout) != "rc=126\n" || !strings.Contains(string(o.Stderr), "revoked") {
		t.Fatalf("after rm: %q %q", o.Stdout, o.Stderr)
	}
}

// A grant the client keeps for the connection only is not written to
// the grants file and is gone for a new connection (and a new sandbox).
func TestApprovalGrantConnectionOnly(t *testing.T) {
	store := grantsStore(t)
	opts := testOptions(t)
	opts.Approvals = approval.Config{Store: store}
	srv := NewServer(opts)
	c := connect(t, srv)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	ws, _ := c.openSandbox("sb", "local", false)

	m, p := c.ask("sb", "a", "deploy prod; echo rc=$?")
	always := offer(t, p, func(o ApprovalGrant) bool { return o.Lifetime == "always" && o.Scope == ScopeExact })
	c.Respond(m, ApprovalResult{Decision: DecisionAllow, Grant: always, ConnectionOnly: true}, nil)
	c.gateCallsOnly(1, "")
	c.Collect("a", 30*time.Second, nil)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "b", SandboxID: "sb", Argv: []string{"sh", "-c", "deploy prod"}}, nil)
	c.gateCallsOnly(1, "the connection's grant was not used")
	c.Collect("b", 30*time.Second, nil)
	if l, err := store.List(time.Now()); err != nil || len(l) != 0 {
		t.Fatalf("a connection-only grant reached the grants file: %+v, %v", l, err)
	}

	c2 := connect(t, srv)
	c2.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c2.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb", Backend: "local", Workspace: ws}, nil)
	m, _ = c2.ask("sb", "c", "deploy prod; echo rc=$?")
	c2.Respond(m, ApprovalResult{Decision: DecisionDeny}, nil)
	if o := c2.Collect("c", 30*time.Second, nil); string(o.Stdout) != "rc=126\n" {
		t.Fatalf("new connection: %q %q", o.Stdout, o.Stderr)
	}
}

// A grant in an answer is checked: one for another gate, or a pattern
// that does not compile, allows nothing (the call is denied).
func TestApprovalGrantRefused(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals = approval.Config{Store: grantsStore(t)}
	c := newClient(t, opts)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)
	for i, g := range []ApprovalGrant{
		{Gate: "other", Scope: ScopeAny, Lifetime: "always"},
		{Gate: "deploy", Scope: ScopePatterns, Patterns: []string{"("}, Lifetime: "always"},
		{Gate: "deploy", Scope: "everything", Lifetime: "always"},
	} {
		id := string(rune('a' + i))
		m, _ := c.ask("sb", id, "deploy prod; echo rc=$?")
		c.Respond(m, ApprovalResult{Decision: DecisionAllow, Grant: &g}, nil)
		if o := c.Collect(id, 30*time.Second, nil); string(o.Stdout) != "rc=126\n" || !strings.Contains(string(o.Stderr), "grant") {
			t.Fatalf("grant %+v: %q %q", g, o.Stdout, o.Stderr)
		}
	}
}

// approvals.max_pending and approvals.timeout apply to serve: past the
// cap a call is denied at once; an unanswered question is denied after
// the timeout (and withdrawn).
func TestApprovalBoundsServe(t *testing.T) {
	opts := testOptions(t)
	opts.Approvals = approval.Config{MaxPending: 1}
	c := newClient(t, opts)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)
	first, _ := c.ask("sb", "a", "deploy a; echo rc=$?")
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "b", SandboxID: "sb", Argv: []string{"sh", "-c", "deploy b; echo rc=$?"}}, nil)
	if o := c.Collect("b", 30*time.Second, nil); string(o.Stdout) != "rc=126\n" || !strings.Contains(string(o.Stderr), "approvals.max_pending") {
		t.Fatalf("past max_pending: %q %q", o.Stdout, o.Stderr)
	}
	c.Respond(first, ApprovalResult{Decision: DecisionDeny}, nil)
	c.Collect("a", 30*time.Second, nil)

	opts = testOptions(t)
	opts.Approvals = approval.Config{Timeout: 50 * time.Millisecond}
	c = newUninitialized(t, opts)
	var init InitializeResult
	c.Call(MethodInitialize, InitializeParams{ClientName: "t", ProtocolVersion: 1}, &init)
	c.Notify(MethodInitialized, struct{}{})
	if init.Limits.ApprovalTimeoutMs != 50 {
		t.Fatalf("limits.approvalTimeoutMs %d, want 50", init.Limits.ApprovalTimeoutMs)
	}
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)
	m, _ := c.ask("sb", "t", "deploy a; echo rc=$?")
	_, raw := c.nextRequest(MethodCancelRequest)
	var cp CancelParams
	json.Unmarshal(raw, &cp)
	if string(cp.ID) != string(m.ID) {
		t.Fatalf("$/cancelRequest %s, want %s", cp.ID, m.ID)
	}
	if o := c.Collect("t", 30*time.Second, nil); string(o.Stdout) != "rc=126\n" || !strings.Contains(string(o.Stderr), "approvals.timeout") {
		t.Fatalf("unanswered: %q %q", o.Stdout, o.Stderr)
	}
}

// The command policy is checked again at each gate call with the gate's
// real name and arguments: a script that computes a denied gate's name
// is refused at call time (126, the rule named); an ask rule asks the
// client, naming the rule.
func TestCommandPolicyAtGateCall(t *testing.T) {
	// unknown: allow, so the scripts below start without a question of
	// their own (process/start would ask about what the policy marks
	// ask) and the gate calls meet the policy.
	pol, err := cmdpolicy.New(cmdpolicy.Config{Unknown: "allow", Rules: []cmdpolicy.Rule{
		{Command: "read_file", Decision: "deny"},
		{Command: "list_dir", Args: []string{"secret.*"}, Decision: "ask"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t)
	opts.Approvals = approval.Config{Commands: pol}
	c := newClient(t, opts)
	c.openSandbox("sb", "local", false)
	o := c.Run("sb", "p", nil, "sh", "-c", `g=rea; ${g}d_file x; echo rc=$?`)
	if string(o.Stdout) != "rc=126\n" || !strings.Contains(string(o.Stderr), "rule 0 {command: read_file, decision: deny}") {
		t.Fatalf("computed gate name: %q %q", o.Stdout, o.Stderr)
	}
	m, p := c.ask("sb", "q", `g=list; ${g}_dir secrets; echo rc=$?`)
	if p.Gate != "list_dir" || !strings.Contains(p.Rule, "rule 1") {
		t.Fatalf("approval/request %+v", p)
	}
	c.Respond(m, ApprovalResult{Decision: DecisionDeny}, nil)
	if o := c.Collect("q", 30*time.Second, nil); string(o.Stdout) != "rc=126\n" {
		t.Fatalf("ask: %q %q", o.Stdout, o.Stderr)
	}
	if o := c.Run("sb", "r", nil, "sh", "-c", `list_dir . >/dev/null; echo rc=$?`); string(o.Stdout) != "rc=0\n" {
		t.Fatalf("allowed: %q %q", o.Stdout, o.Stderr)
	}
}

// A workspace grant in an answer is for the call's workspace, whatever
// workspace the client names: an answer about one call cannot allow
// calls from another workspace.
func TestApprovalGrantWorkspaceIsTheCalls(t *testing.T) {
	store := grantsStore(t)
	opts := testOptions(t)
	opts.Approvals = approval.Config{Store: store}
	c := newClient(t, opts)
	c.Call(MethodGateRegister, GateRegisterParams{Name: "deploy", Approval: true}, nil)
	c.openSandbox("sb", "local", false)
	m, p := c.ask("sb", "a", "deploy prod")
	g := offer(t, p, func(o ApprovalGrant) bool { return o.Lifetime == "workspace" })
	ws := g.Workspace
	g.Workspace = "/elsewhere"
	c.Respond(m, ApprovalResult{Decision: DecisionAllow, Grant: g}, nil)
	c.gateCallsOnly(1, "")
	c.Collect("a", 30*time.Second, nil)
	l, err := store.List(time.Now())
	if err != nil || len(l) != 1 || l[0].Workspace != ws || ws == "" {
		t.Fatalf("stored %+v (want workspace %q), %v", l, ws, err)
	}
}
