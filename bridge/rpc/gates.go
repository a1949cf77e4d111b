package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// KindRuntime is the kind gate/list gives gates registered over the
// protocol.
const KindRuntime = "runtime"

// runtimeGate is a gate the client registered: a call asks the client
// (gate/call) and waits for its answer.
type runtimeGate struct {
	c        *conn
	spec     gates.Spec
	schema   json.RawMessage
	approval bool
	timeout  time.Duration // the client's deadline to answer
}

func (g *runtimeGate) Spec() gates.Spec { return g.spec }

// InputSchema implements gates.Schemer.
func (g *runtimeGate) InputSchema() json.RawMessage { return g.schema }

// gateCall is one gate/call waiting for the client; gate/output writes
// to it until the answer comes.
type gateCall struct {
	mu             sync.Mutex
	done           bool
	stdout, stderr io.Writer
}

// Call sends gate/call and waits for the answer, the gate's deadline, the
// caller going away or the end of the connection.
func (g *runtimeGate) Call(ctx context.Context, call *gates.Call) (int, error) {
	c := g.c
	c.mu.Lock()
	pr := c.bySession[call.SessionID]
	c.mu.Unlock()
	var procID, sbID string
	if pr != nil {
		procID, sbID = pr.id, pr.sb.id
	}
	callID := procID + ":" + call.ID
	deadline := time.Now().Add(g.timeout)
	gctx, cancel := context.WithDeadlineCause(ctx, deadline, errNoAnswer)
	defer cancel()

	gc := &gateCall{stdout: call.Stdout, stderr: call.Stderr}
	c.mu.Lock()
	c.calls[callID] = gc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, callID)
		c.mu.Unlock()
		gc.mu.Lock()
		gc.done = true
		gc.mu.Unlock()
	}()
	args := call.Args
	if args == nil {
		args = []string{}
	}
	m, err := c.request(gctx, MethodGateCall, GateCallParams{CallID: callID, Gate: g.spec.Name, Args: args, ArgsBase64: lossless.List(args),
		Stdin: call.Stdin, Cwd: call.Cwd, CwdBase64: lossless.Bytes(call.Cwd), ProcessID: procID, SandboxID: sbID, DeadlineMs: deadline.UnixMilli()})
	if err != nil {
		var re *Error
		switch {
		case errors.As(err, &re):
			return fail(call, g.spec.Name, "the runtime answered with an error: "+re.Message)
		case ctx.Err() != nil:
			return gates.ExitTimeout, context.Cause(ctx) // the caller went away, the run ended: the dispatcher says which
		case errors.Is(err, errNoAnswer):
			return fail(call, g.spec.Name, fmt.Sprintf("the runtime did not answer within %v", g.timeout))
		case c.ctx.Err() != nil:
			return fail(call, g.spec.Name, "the runtime disconnected")
		default:
			return fail(call, g.spec.Name, err.Error())
		}
	}
	var res GateCallResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return fail(call, g.spec.Name, "the runtime's answer is not a gate/call result: "+err.Error())
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	call.Stdout.Write(res.Stdout)
	call.Stderr.Write(res.Stderr)
	if res.ExitCode < 0 || res.ExitCode > 255 {
		return fail(call, g.spec.Name, fmt.Sprintf("the runtime answered exit code %d (want 0-255)", res.ExitCode))
	}
	return res.ExitCode, nil
}

var errNoAnswer = errors.New("the runtime did not answer in time")

func fail(call *gates.Call, gate, msg string) (int, error) {
	fmt.Fprintf(call.Stderr, "gatebridge: %s: %s\n", gate, msg)
	return gates.ExitFailure, nil
}

// gateOutput streams a chunk of a gate call still waiting for its answer;
// chunks for calls already answered or gone are dropped.
func (c *conn) gateOutput(params json.RawMessage) {
	var p GateOutputParams
	if decode(params, &p) != nil {
		return // a notification gets no error response
	}
	c.mu.Lock()
	gc := c.calls[p.CallID]
	c.mu.Unlock()
	if gc == nil {
		return
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.done {
		return
	}
	switch p.Stream {
	case "stdout":
		gc.stdout.Write(p.Chunk)
	case "stderr":
		gc.stderr.Write(p.Chunk)
	}
}

func (c *conn) gateRegister(params json.RawMessage) (any, error) {
	var p GateRegisterParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := required("name", p.Name); err != nil {
		return nil, err
	}
	if err := mailbox.ValidateName(p.Name); err != nil {
		return nil, errorf(CodeInvalidParams, "invalid params: \"name\": %v", err)
	}
	var stdin gates.StdinMode
	if err := stdin.UnmarshalText([]byte(p.Stdin)); err != nil {
		return nil, errorf(CodeInvalidParams, "invalid params: \"stdin\": %v", err)
	}
	if p.TimeoutMs < 0 {
		return nil, errorf(CodeInvalidParams, "invalid params: \"timeoutMs\" must not be negative")
	}
	params2 := p.Params
	if len(p.InputSchema) > 0 {
		if len(p.Params) > 0 {
			return nil, errorf(CodeInvalidParams, "invalid params: give \"params\" or \"inputSchema\", not both")
		}
		var err error
		if params2, err = gates.ParamsOfSchema(p.InputSchema); err != nil {
			return nil, errorf(CodeInvalidParams, "invalid params: \"inputSchema\": %v", err)
		}
	}
	timeout := c.srv.opts.GateTimeout
	if p.TimeoutMs > 0 {
		timeout = time.Duration(p.TimeoutMs) * time.Millisecond
	}
	usage := p.Usage
	if usage == "" {
		usage = gates.UsageOf(p.Name, params2)
	}
	g := &runtimeGate{c: c, schema: p.InputSchema, approval: p.Approval, timeout: timeout,
		spec: gates.Spec{Name: p.Name, Summary: strings.TrimSpace(p.Summary), Usage: usage, Params: params2, Stdin: stdin,
			// The dispatcher's own limit comes after ours: the caller gets
			// "did not answer" (exit 1), not a bare timeout.
			Timeout: timeout + 2*time.Second}}

	base, err := c.baseNames()
	if err != nil {
		return nil, err
	}
	if base[p.Name] != "" {
		return nil, errorf(CodeConflict, "gate %q is a %s gate of this server; pick another name", p.Name, base[p.Name])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rtGates[p.Name] != nil {
		return nil, errorf(CodeConflict, "gate %q is already registered on this connection (gate/unregister it first)", p.Name)
	}
	var done []*sbox
	for _, sb := range c.sandboxes {
		if sb.reg == nil {
			continue // still opening: it registers c.rtGates when done
		}
		if err := sb.reg.Register(g); err != nil {
			for _, d := range done {
				d.reg.Unregister(p.Name)
			}
			return nil, errorf(CodeConflict, "gate %q: %v", p.Name, err)
		}
		done = append(done, sb)
	}
	c.rtGates[p.Name] = g
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rtGates[p.Name] == nil {
		return nil, errorf(CodeNotFound, "no gate %q was registered on this connection", p.Name)
	}
	delete(c.rtGates, p.Name)
	for _, sb := range c.sandboxes {
		if sb.reg != nil {
			sb.reg.Unregister(p.Name)
		}
	}
	return struct{}{}, nil
}

// baseNames are the built-in and configured gates' names, with their
// kinds (computed once per connection).
func (c *conn) baseNames() (map[string]string, error) {
	c.mu.Lock()
	if c.base != nil {
		defer c.mu.Unlock()
		return c.base, nil
	}
	c.mu.Unlock()
	ws := c.srv.opts.DefaultWorkspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	reg, kinds, err := c.baseGates(ws, ws, false)
	if err != nil {
		return nil, err
	}
	reg.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.baseSpecs = kinds, reg.Specs()
	return c.base, nil
}

func (c *conn) gateList(params json.RawMessage) (any, error) {
	if err := decode(params, &struct{}{}); err != nil {
		return nil, err
	}
	kinds, err := c.baseNames()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	docs := make([]GateDoc, 0, len(c.baseSpecs)+len(c.rtGates))
	for _, s := range c.baseSpecs {
		docs = append(docs, gateDoc(s, kinds[s.Name], nil))
	}
	for _, g := range c.rtGates {
		docs = append(docs, gateDoc(g.spec, KindRuntime, g.schema))
	}
	c.mu.Unlock()
	sort.Slice(docs, func(i, j int) bool { return docs[i].Name < docs[j].Name })
	return docs, nil
}

func gateDoc(s gates.Spec, kind string, schema json.RawMessage) GateDoc {
	p := s.Params
	if p == nil {
		p = []gates.Param{}
	}
	return GateDoc{Name: s.Name, Summary: s.Summary, Usage: s.Usage, Params: p, Stdin: s.Stdin.String(), Kind: kind, InputSchema: schema}
}

// approver asks the client before a gate that needs approval runs in
// process pr of sandbox sb.
func (c *conn) approver(sb *sbox, owner func() *proc) bridge.ApproveFunc {
	return func(ctx context.Context, spec gates.Spec, req *bridge.Request) error {
		var procID string
		if pr := owner(); pr != nil {
			procID = pr.id
		}
		c.mu.Lock()
		g := c.rtGates[spec.Name]
		c.mu.Unlock()
		need := g != nil && g.approval || c.srv.opts.ApprovalGates[spec.Name]
		if gate, err := sb.reg.Lookup(spec.Name); err == nil {
			if a, ok := gate.(gates.Approver); ok && a.NeedsApproval() {
				need = true
			}
		}
		if !need {
			return nil
		}
		sb.mu.Lock()
		ok := sb.allowed[spec.Name]
		sb.mu.Unlock()
		if ok {
			return nil
		}
		actx, cancel := context.WithTimeoutCause(ctx, c.srv.opts.ApprovalTimeout, errNoAnswer)
		defer cancel()
		args := req.Args
		if args == nil {
			args = []string{}
		}
		m, err := c.request(actx, MethodApprovalRequest, ApprovalRequestParams{CallID: procID + ":" + req.ID,
			Gate: spec.Name, Args: args, ArgsBase64: lossless.List(args), SandboxID: sb.id, ProcessID: procID})
		if err != nil {
			var re *Error
			switch {
			case errors.As(err, &re):
				return fmt.Errorf("not approved: the runtime answered with an error: %s", re.Message)
			case ctx.Err() != nil:
				return context.Cause(ctx)
			case errors.Is(err, errNoAnswer):
				return fmt.Errorf("not approved: the runtime did not answer within %v", c.srv.opts.ApprovalTimeout)
			case c.ctx.Err() != nil:
				return errors.New("not approved: the runtime disconnected")
			}
			return fmt.Errorf("not approved: %v", err)
		}
		var res ApprovalResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			return fmt.Errorf("not approved: the runtime's answer is not an approval: %v", err)
		}
		switch res.Decision {
		case DecisionAllow:
			return nil
		case DecisionAllowForSession:
			sb.mu.Lock()
			sb.allowed[spec.Name] = true
			sb.mu.Unlock()
			return nil
		case DecisionDeny:
			if res.Reason != "" {
				return fmt.Errorf("denied by the runtime: %s", res.Reason)
			}
			return errors.New("denied by the runtime")
		default:
			return fmt.Errorf("not approved: unknown decision %q (want allow, deny or allowForSession)", res.Decision)
		}
	}
}
