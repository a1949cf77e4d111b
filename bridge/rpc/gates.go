package rpc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// KindRuntime is the kind gate/list gives gates registered over the
// protocol.
const KindRuntime = control.KindRuntime

// answerer answers the connection's runtime gates: gate/call to the
// client.
type answerer struct{ c *conn }

func (a answerer) AnswerGate(ctx context.Context, r *control.GateRequest) (*control.GateAnswer, error) {
	c := a.c
	var procID, sbID string
	if r.Process != nil {
		procID, sbID = r.Process.ID(), r.Process.Sandbox().ID()
	}
	m, err := c.request(ctx, MethodGateCall, GateCallParams{CallID: r.CallID, Gate: r.Gate, Args: r.Args, ArgsBase64: lossless.List(r.Args),
		Stdin: r.Stdin, Cwd: r.Cwd, CwdBase64: lossless.Bytes(r.Cwd), ProcessID: procID, SandboxID: sbID, DeadlineMs: r.Deadline.UnixMilli()})
	if err != nil {
		var re *Error
		switch {
		case errors.As(err, &re):
			return nil, errors.New("the runtime answered with an error: " + re.Message)
		case ctx.Err() != nil:
			return nil, err
		case c.ctx.Err() != nil:
			return nil, errors.New("the runtime disconnected")
		}
		return nil, err
	}
	var res GateCallResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return nil, errors.New("the runtime's answer is not a gate/call result: " + err.Error())
	}
	return &control.GateAnswer{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode}, nil
}

// gateOutput streams a chunk of a gate call still waiting for its answer.
func (c *conn) gateOutput(params json.RawMessage) {
	var p GateOutputParams
	if decode(params, &p) != nil {
		return // a notification gets no error response
	}
	c.gates.Output(p.CallID, p.Stream, p.Chunk)
}

func (c *conn) gateRegister(params json.RawMessage) (any, error) {
	var p GateRegisterParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := required("name", p.Name); err != nil {
		return nil, err
	}
	if err := control.CheckGateName(p.Name); err != nil {
		return nil, err
	}
	// Omitted: if-no-args, so that `echo hello | g` reaches the gate
	// (models pipe into tools all the time); "none" must be asked for.
	var stdin gates.StdinMode
	if err := stdin.UnmarshalText([]byte(cmp.Or(p.Stdin, "if-no-args"))); err != nil {
		return nil, errorf(CodeInvalidParams, "invalid params: \"stdin\": %v", err)
	}
	if p.TimeoutMs < 0 {
		return nil, errorf(CodeInvalidParams, "invalid params: \"timeoutMs\" must not be negative")
	}
	err := c.gates.Register(control.RuntimeGate{Name: p.Name, Summary: p.Summary, Usage: p.Usage, Params: p.Params,
		InputSchema: p.InputSchema, Stdin: stdin, Approval: p.Approval, Timeout: msec(p.TimeoutMs)})
	if err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (c *conn) gateUnregister(params json.RawMessage) (any, error) {
	var p GateUnregisterParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := required("name", p.Name); err != nil {
		return nil, err
	}
	if err := c.gates.Unregister(p.Name); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (c *conn) gateList(params json.RawMessage) (any, error) {
	if err := decode(params, &struct{}{}); err != nil {
		return nil, err
	}
	infos, err := c.gates.List()
	if err != nil {
		return nil, err
	}
	docs := make([]GateDoc, 0, len(infos))
	for _, g := range infos {
		docs = append(docs, gateDoc(g.Spec, g.Kind, g.InputSchema))
	}
	return docs, nil
}

func gateDoc(s gates.Spec, kind string, schema json.RawMessage) GateDoc {
	p := s.Params
	if p == nil {
		p = []gates.Param{}
	}
	return GateDoc{Name: s.Name, Summary: s.Summary, Usage: s.Usage, Params: p, Stdin: s.Stdin.String(), Kind: kind, InputSchema: schema}
}

// approver asks the client (approval/request) about a call that needs
// approval, for the host's decider (bridge/approval), which keeps the
// grant an answer carries.
type approver struct{ c *conn }

func (a approver) Ask(ctx context.Context, r *control.ApprovalRequest) (approval.Answer, error) {
	c := a.c
	var procID string
	if r.Process != nil {
		procID = r.Process.ID()
	}
	args := r.Args
	if args == nil {
		args = []string{}
	}
	offers := make([]ApprovalGrant, 0, len(r.Offers))
	for _, g := range r.Offers {
		offers = append(offers, grantOf(g))
	}
	m, err := c.request(ctx, MethodApprovalRequest, ApprovalRequestParams{CallID: r.CallID,
		Gate: r.Gate, Args: args, ArgsBase64: lossless.List(args), SandboxID: r.Sandbox.ID(), ProcessID: procID,
		Offers: offers, Rule: r.Rule, Command: r.Command, CommandBase64: lossless.List(r.Command)})
	if err != nil {
		var re *Error
		switch {
		case errors.As(err, &re):
			return approval.Answer{}, fmt.Errorf("the runtime answered with an error: %s", re.Message)
		case ctx.Err() != nil:
			return approval.Answer{}, context.Cause(ctx) // the decider says which: timeout or withdrawn
		case c.ctx.Err() != nil:
			return approval.Answer{}, errors.New("the runtime disconnected")
		}
		return approval.Answer{}, err
	}
	var res ApprovalResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return approval.Answer{}, fmt.Errorf("the runtime's answer is not an approval: %v", err)
	}
	ans := approval.Answer{By: approval.ByRuntime, ConnectionOnly: res.ConnectionOnly}
	switch res.Decision {
	case DecisionAllow:
		ans.Allow = true
		if res.Grant != nil {
			g, err := res.Grant.grant(r.Gate, r.Workspace)
			if err != nil {
				return approval.Answer{}, fmt.Errorf("the runtime's grant: %v", err)
			}
			ans.Grant = &g
		}
	case DecisionAllowForSession:
		// The session offer: any arguments, for the sandbox's life.
		ans.Allow, ans.Grant = true, &approval.Grant{Gate: r.Gate, AnyArgs: true, Lifetime: approval.LifeSession}
	case DecisionDeny:
		ans.Reason = "denied by the runtime"
		if res.Reason != "" {
			ans.Reason += ": " + res.Reason
		}
	default:
		return approval.Answer{}, fmt.Errorf("unknown decision %q (want allow, deny or allowForSession)", res.Decision)
	}
	return ans, nil
}

// grantOf is g in the protocol.
func grantOf(g approval.Grant) ApprovalGrant {
	out := ApprovalGrant{Gate: g.Gate, Lifetime: string(g.Lifetime), Workspace: g.Workspace, Description: g.Describe()}
	switch {
	case g.AnyArgs:
		out.Scope = ScopeAny
	case g.Patterns != nil:
		out.Scope, out.Patterns = ScopePatterns, g.Patterns
	default:
		out.Scope, out.Exact, out.ExactBase64 = ScopeExact, g.Exact, lossless.List(g.Exact)
	}
	if !g.Expires.IsZero() {
		out.ExpiresMs = g.Expires.UnixMilli()
	}
	return out
}

// grant is the grant an answer gives for a call of gate: its workspace
// is the call's (a client answers about this call, not another
// workspace's), its session the sandbox's.
func (p *ApprovalGrant) grant(gate, workspace string) (approval.Grant, error) {
	if p.Gate != gate {
		return approval.Grant{}, fmt.Errorf("it is for gate %s, not %s", lossless.Quote(p.Gate), lossless.Quote(gate))
	}
	g := approval.Grant{Gate: p.Gate, Lifetime: approval.Lifetime(p.Lifetime)}
	switch p.Lifetime {
	case string(approval.LifeWorkspace):
		g.Workspace = workspace
	case string(approval.LifeSession), string(approval.LifeAlways):
	default:
		return g, fmt.Errorf("lifetime %q: want session, workspace or always", p.Lifetime)
	}
	switch p.Scope {
	case ScopeAny:
		g.AnyArgs = true
	case ScopePatterns:
		if len(p.Patterns) == 0 {
			return g, errors.New(`scope "patterns" needs patterns`)
		}
		g.Patterns = p.Patterns
	case ScopeExact:
		exact, err := lossless.Strings(p.Exact, p.ExactBase64)
		if err != nil {
			return g, fmt.Errorf("exactBase64: %v", err)
		}
		g.Exact = append([]string{}, exact...)
	default:
		return g, fmt.Errorf("scope %q: want exact, patterns or any", p.Scope)
	}
	if p.ExpiresMs > 0 {
		g.Expires = time.UnixMilli(p.ExpiresMs).UTC()
	}
	return g, g.Validate()
}
