package rpc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// approver asks the client (approval/request) before a gate that needs
// approval runs.
type approver struct{ c *conn }

func (a approver) Approve(ctx context.Context, r *control.ApprovalRequest) (control.Decision, error) {
	c := a.c
	var procID string
	if r.Process != nil {
		procID = r.Process.ID()
	}
	m, err := c.request(ctx, MethodApprovalRequest, ApprovalRequestParams{CallID: r.CallID,
		Gate: r.Gate.Name, Args: r.Args, ArgsBase64: lossless.List(r.Args), SandboxID: r.Sandbox.ID(), ProcessID: procID})
	if err != nil {
		var re *Error
		switch {
		case errors.As(err, &re):
			return control.Deny, fmt.Errorf("not approved: the runtime answered with an error: %s", re.Message)
		case errors.Is(context.Cause(ctx), control.ErrNoAnswer):
			return control.Deny, fmt.Errorf("not approved: the runtime did not answer within %v", c.srv.opts.ApprovalTimeout)
		case ctx.Err() != nil:
			return control.Deny, context.Cause(ctx)
		case c.ctx.Err() != nil:
			return control.Deny, errors.New("not approved: the runtime disconnected")
		}
		return control.Deny, fmt.Errorf("not approved: %v", err)
	}
	var res ApprovalResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return control.Deny, fmt.Errorf("not approved: the runtime's answer is not an approval: %v", err)
	}
	switch res.Decision {
	case DecisionAllow:
		return control.Allow, nil
	case DecisionAllowForSession:
		return control.AllowForSandbox, nil
	case DecisionDeny:
		if res.Reason != "" {
			return control.Deny, fmt.Errorf("denied by the runtime: %s", res.Reason)
		}
		return control.Deny, errors.New("denied by the runtime")
	default:
		return control.Deny, fmt.Errorf("not approved: unknown decision %q (want allow, deny or allowForSession)", res.Decision)
	}
}
