package control

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
	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
)

// KindRuntime is the kind of gates registered at run time.
const KindRuntime = "runtime"

// GateSet holds the gates one client registers at run time, answered by
// its Answerer: every sandbox opened with it offers them.
type GateSet struct {
	h   *Host
	ans Answerer

	mu        sync.Mutex
	gates     map[string]*runtimeGate
	sandboxes map[*Sandbox]bool
	calls     map[string]*gateCall // calls waiting for their answer, by call id
	base      map[string]string    // built-in and configured gates' kinds by name
	baseSpecs []gates.Spec
}

// Answerer answers the calls of a GateSet's gates: a front end asks its
// client. ctx ends with cause ErrNoAnswer at the gate's deadline.
type Answerer interface {
	AnswerGate(ctx context.Context, req *GateRequest) (*GateAnswer, error)
}

// GateRequest is one call of a runtime gate.
type GateRequest struct {
	// CallID is unique while the call waits: Output takes it.
	CallID   string
	Gate     string
	Args     []string
	Stdin    []byte
	Cwd      string
	Process  *Process // the caller (nil when unknown)
	Deadline time.Time
}

// GateAnswer is a runtime gate's answer.
type GateAnswer struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// RuntimeGate describes a gate to register.
type RuntimeGate struct {
	Name, Summary, Usage string
	// Params or InputSchema (a JSON schema), not both.
	Params      []gates.Param
	InputSchema json.RawMessage
	Stdin       gates.StdinMode
	// Approval: every call asks the sandbox's Approver first.
	Approval bool
	// Timeout is the deadline to answer (0: Options.GateTimeout).
	Timeout time.Duration
}

// NewGateSet returns an empty set whose calls a answers.
func (h *Host) NewGateSet(a Answerer) *GateSet {
	return &GateSet{h: h, ans: a, gates: map[string]*runtimeGate{}, sandboxes: map[*Sandbox]bool{}, calls: map[string]*gateCall{}}
}

// runtimeGate is a registered gate: a call asks the Answerer and waits.
type runtimeGate struct {
	set      *GateSet
	spec     gates.Spec
	schema   json.RawMessage
	approval bool
	timeout  time.Duration
}

func (g *runtimeGate) Spec() gates.Spec { return g.spec }

// InputSchema implements gates.Schemer.
func (g *runtimeGate) InputSchema() json.RawMessage { return g.schema }

// gateCall is one call waiting for its answer; Output writes to it until
// the answer comes.
type gateCall struct {
	mu             sync.Mutex
	done           bool
	stdout, stderr io.Writer
}

// Call asks the Answerer and waits for the answer, the gate's deadline,
// the caller going away or the end of the run.
func (g *runtimeGate) Call(ctx context.Context, call *gates.Call) (int, error) {
	s := g.set
	p := s.h.processOf(call.SessionID)
	var procID string
	if p != nil {
		procID = p.id
	}
	callID := procID + ":" + call.ID
	deadline := time.Now().Add(g.timeout)
	gctx, cancel := context.WithDeadlineCause(ctx, deadline, ErrNoAnswer)
	defer cancel()

	gc := &gateCall{stdout: call.Stdout, stderr: call.Stderr}
	s.mu.Lock()
	s.calls[callID] = gc
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.calls, callID)
		s.mu.Unlock()
		gc.mu.Lock()
		gc.done = true
		gc.mu.Unlock()
	}()
	// The runtime is the client, which sees no secret value anywhere
	// (with the local backend a command can read one): what the command
	// gave is redacted as its output is.
	red := s.h.opts.Bridge.Redact
	args := make([]string, len(call.Args))
	for i, a := range call.Args {
		args[i] = red.String(a)
	}
	res, err := s.ans.AnswerGate(gctx, &GateRequest{CallID: callID, Gate: g.spec.Name, Args: args, Stdin: red.Bytes(call.Stdin),
		Cwd: red.String(call.Cwd), Process: p, Deadline: deadline})
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return gates.ExitTimeout, context.Cause(ctx) // the caller went away, the run ended: the dispatcher says which
		case errors.Is(err, ErrNoAnswer):
			return fail(call, g.spec.Name, fmt.Sprintf("the runtime did not answer within %v", g.timeout))
		default:
			return fail(call, g.spec.Name, err.Error())
		}
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

func fail(call *gates.Call, gate, msg string) (int, error) {
	fmt.Fprintf(call.Stderr, "gatebridge: %s: %s\n", gate, msg)
	return gates.ExitFailure, nil
}

// Output streams a chunk of a call still waiting for its answer (stream
// "stdout" or "stderr"); chunks for calls answered or gone are dropped.
func (s *GateSet) Output(callID, stream string, chunk []byte) {
	s.mu.Lock()
	gc := s.calls[callID]
	s.mu.Unlock()
	if gc == nil {
		return
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.done {
		return
	}
	switch stream {
	case "stdout":
		gc.stdout.Write(chunk)
	case "stderr":
		gc.stderr.Write(chunk)
	}
}

// Register adds a gate to every sandbox of the set, open or to come.
func (s *GateSet) Register(rg RuntimeGate) error {
	if err := CheckGateName(rg.Name); err != nil {
		return err
	}
	if rg.Timeout < 0 {
		return invalid("timeoutMs", "%q must not be negative", "timeoutMs")
	}
	params := rg.Params
	if len(rg.InputSchema) > 0 {
		if len(rg.Params) > 0 {
			return invalid("inputSchema", "give %q or %q, not both", "params", "inputSchema")
		}
		var err error
		if params, err = gates.ParamsOfSchema(rg.InputSchema); err != nil {
			return invalid("inputSchema", "%q: %v", "inputSchema", err)
		}
	}
	timeout := s.h.opts.GateTimeout
	if rg.Timeout > 0 {
		timeout = rg.Timeout
	}
	usage := rg.Usage
	if usage == "" {
		usage = gates.UsageOf(rg.Name, params)
	}
	g := &runtimeGate{set: s, schema: rg.InputSchema, approval: rg.Approval, timeout: timeout,
		spec: gates.Spec{Name: rg.Name, Summary: strings.TrimSpace(rg.Summary), Usage: usage, Params: params, Stdin: rg.Stdin,
			// The dispatcher's own limit comes after ours: the caller gets
			// "did not answer" (exit 1), not a bare timeout.
			Timeout: timeout + 2*time.Second}}

	base, err := s.baseNames()
	if err != nil {
		return err
	}
	if base[rg.Name] != "" {
		return errorf(KindConflict, "gate %q is a %s gate of this server; pick another name", rg.Name, base[rg.Name])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[rg.Name] != nil {
		return errorf(KindConflict, "gate %q is already registered on this connection (gate/unregister it first)", rg.Name)
	}
	var done []*Sandbox
	for sb := range s.sandboxes {
		if err := sb.reg.Register(g); err != nil {
			for _, d := range done {
				d.reg.Unregister(rg.Name)
			}
			return errorf(KindConflict, "gate %q: %v", rg.Name, err)
		}
		done = append(done, sb)
	}
	s.gates[rg.Name] = g
	return nil
}

// Unregister removes a gate from every sandbox of the set.
func (s *GateSet) Unregister(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[name] == nil {
		return errorf(KindNotFound, "no gate %q was registered on this connection", name)
	}
	delete(s.gates, name)
	for sb := range s.sandboxes {
		sb.reg.Unregister(name)
	}
	return nil
}

// attach registers the set's gates in sb's registry, and the ones
// registered later. Under s.mu: a gate registered meanwhile is added
// either by Register or here, never by neither.
func (s *GateSet) attach(sb *Sandbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gates {
		if err := sb.reg.Register(g); err != nil {
			return errorf(KindConflict, "registered gate %s: %v", g.spec.Name, err)
		}
	}
	s.sandboxes[sb] = true
	return nil
}

func (s *GateSet) detach(sb *Sandbox) {
	s.mu.Lock()
	delete(s.sandboxes, sb)
	s.mu.Unlock()
}

// baseNames are the built-in and configured gates' names, with their
// kinds (computed once per set).
func (s *GateSet) baseNames() (map[string]string, error) {
	s.mu.Lock()
	if s.base != nil {
		defer s.mu.Unlock()
		return s.base, nil
	}
	s.mu.Unlock()
	ws := s.h.opts.DefaultWorkspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	reg, kinds, err := s.h.baseGates(ws, ws, false)
	if err != nil {
		return nil, err
	}
	reg.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base, s.baseSpecs = kinds, reg.Specs()
	return s.base, nil
}

// GateInfo describes a gate for a listing.
type GateInfo struct {
	Spec        gates.Spec
	Kind        string
	InputSchema json.RawMessage // runtime gates only
}

// List describes the built-in and configured gates and the set's own,
// by name.
func (s *GateSet) List() ([]GateInfo, error) {
	kinds, err := s.baseNames()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]GateInfo, 0, len(s.baseSpecs)+len(s.gates))
	for _, sp := range s.baseSpecs {
		out = append(out, GateInfo{Spec: sp, Kind: kinds[sp.Name]})
	}
	for _, g := range s.gates {
		out = append(out, GateInfo{Spec: g.spec, Kind: KindRuntime, InputSchema: g.schema})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

// Approver asks about a call of a gate that needs approval, or a command
// the command policy marks ask: a front end implements it (JSON-RPC asks
// its client). It is an [approval.Approver] that also learns the sandbox
// and the process the question comes from ([FromApproval] adapts a plain
// one). The sandbox's decisions are made by the host's [approval.Decider]
// (Options.Approvals): a deny, then a grant, then the gate's setting; the
// Approver is asked only when that says ask, within approvals.timeout,
// and an answer's grant is kept as a person's would be.
type Approver interface {
	Ask(ctx context.Context, req *ApprovalRequest) (approval.Answer, error)
}

// ApprovalRequest is one question: the gate call (or command) with its
// offered grants, and where it comes from.
type ApprovalRequest struct {
	*approval.Request
	Sandbox *Sandbox
	Process *Process // nil when unknown; for a command, the process it would be (not started yet)
}

// PresentApprover is an Approver that may have no one behind it for a
// while (an MCP client whose capabilities are known once it has
// initialized, and that may not have declared elicitation): while Present
// is false the sandbox has no Approver, and the decider denies at once
// (approvals' NoOne says why).
type PresentApprover interface {
	Approver
	Present() bool
}

// FromApproval is a as an Approver (it does not need the sandbox).
func FromApproval(a approval.Approver) Approver { return plainApprover{a} }

type plainApprover struct{ a approval.Approver }

func (p plainApprover) Ask(ctx context.Context, req *ApprovalRequest) (approval.Answer, error) {
	return p.a.Ask(ctx, req.Request)
}

// sandboxApprover asks sb's Approver about a call of process p.
type sandboxApprover struct {
	sb *Sandbox
	p  *Process
}

func (a sandboxApprover) Ask(ctx context.Context, req *approval.Request) (approval.Answer, error) {
	return a.sb.approver.Ask(ctx, &ApprovalRequest{Request: req, Sandbox: a.sb, Process: a.p})
}

// asker is the approval.Approver of a question from p in sb (nil when
// sb has no Approver: the decider then denies, no one being there).
func (sb *Sandbox) asker(p *Process) approval.Approver {
	if sb.approver == nil {
		return nil
	}
	if a, ok := sb.approver.(PresentApprover); ok && !a.Present() {
		return nil
	}
	return sandboxApprover{sb, p}
}

// approve is the approval hook of a session of sb.
func (sb *Sandbox) approve(owner func() *Process) bridge.ApproveFunc {
	return func(ctx context.Context, spec gates.Spec, req *bridge.Request) error {
		g, err := sb.reg.Lookup(spec.Name)
		if err != nil {
			return err
		}
		p := owner()
		var procID string
		if p != nil {
			procID = p.id
		}
		args := req.Args
		if args == nil {
			args = []string{}
		}
		return sb.h.decider.Decide(ctx, g, approval.Call{Gate: spec.Name, Args: args, Session: sb.session,
			Workspace: sb.workspace, CallID: procID + ":" + req.ID, Approver: sb.asker(p)})
	}
}

// AskCommand asks sb's Approver about argv, a command the command policy
// marks ask (r, from Options.Approvals.Commands' CheckArgv or
// CheckScript), before it starts: nil to start it, else the refusal (it
// wraps r's *cmdpolicy.DeniedError). Bounded and recorded as gate
// questions are (approvals.timeout, approvals.max_pending, the audit).
func (sb *Sandbox) AskCommand(ctx context.Context, argv []string, r cmdpolicy.Result) error {
	return sb.h.decider.DecideCommand(ctx, argv, r, sb.session, sb.asker(nil))
}

// ApprovalSetting implements gates.ApprovalSetter: a runtime gate
// registered with approval asks.
func (g *runtimeGate) ApprovalSetting() string {
	if g.approval {
		return gates.ApprovalAsk
	}
	return gates.ApprovalNever
}

// CheckGateName says whether name can be a gate's name.
func CheckGateName(name string) error {
	if err := mailbox.ValidateName(name); err != nil {
		return invalid("name", "%q: %v", "name", err)
	}
	return nil
}
