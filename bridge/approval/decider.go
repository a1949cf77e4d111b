package approval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// Defaults of [Config].
const (
	DefaultTimeout    = 5 * time.Minute // as serve's approval/request has had
	DefaultMaxPending = 8
)

// Approver asks someone whether a call may run: a person on a terminal
// ([Terminal]), a JSON-RPC client (approval/request), an MCP host
// (elicitation/create). Ask returns the answer, or ctx's error when ctx
// ends first (the call was withdrawn or timed out): the question must
// then be withdrawn too (a prompt erased, a request cancelled). Ask may
// be called concurrently; an Approver that can show one question at a
// time queues the others, each still bounded by its own ctx.
type Approver interface {
	Ask(ctx context.Context, req *Request) (Answer, error)
}

// Request is one question: may this call run?
type Request struct {
	Gate string
	Args []string
	// Session is the session (sandbox) the call comes from; Workspace
	// its workspace on the host ("" when unknown); CallID the
	// transport's id of the call.
	Session, Workspace, CallID string
	// Offers are the grants the answer may give besides this call, most
	// narrow first: the scopes a front end shows as choices. An answer
	// may carry one of them (or one of its own making for this gate).
	Offers []Grant
	// Command, when set, is a command the command policy (policy.commands)
	// asks about before it starts, not a gate call (Gate and Args are
	// empty, Offers nil): allow or deny only.
	Command []string
	// Rule says what in the command policy asks, in words, when the
	// policy is what asks: for a gate call the rule (or the default, or
	// unknown); for a command also which command of it (a script's).
	Rule string
}

// Answer is what the person or program asked decided.
type Answer struct {
	Allow bool
	// Grant, with Allow, is a grant to keep: a session grant for the
	// rest of the session, a workspace or always grant in the grants
	// file. Nil allows this call only.
	Grant *Grant
	// ConnectionOnly keeps Grant for the session only, whatever its
	// lifetime (a JSON-RPC client that wants it for its connection).
	ConnectionOnly bool
	// By says who answered, for the record: "person" (default) or
	// "runtime".
	By string
	// Reason, on deny, is shown to the caller.
	Reason string
}

// Who decided, in [Record].By.
const (
	ByPerson   = "person"
	ByRuntime  = "runtime"
	ByGrant    = "grant"
	ByConfig   = "config"   // approval: deny
	ByPolicy   = "policy"   // the gate's argument policy refused the arguments
	ByTimeout  = "timeout"  // no answer within approvals.timeout
	ByLimit    = "limit"    // approvals.max_pending reached
	ByCanceled = "canceled" // the call went away while asking
	ByNoOne    = "no_one"   // no one to ask (no terminal, no client)
)

// Record is one decision, for the audit log.
type Record struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // "approval"
	Session string    `json:"session"`
	CallID  string    `json:"call_id,omitempty"`
	Gate    string    `json:"gate,omitempty"`
	// Command is the command a command-policy question was about (Gate
	// is then empty).
	Command    []string `json:"command,omitempty"`
	Args       []string `json:"args"`
	ArgsBase64 [][]byte `json:"args_base64,omitempty"`
	Decision   string   `json:"decision"` // "allow" or "deny"
	By         string   `json:"by"`
	// Grant is the id of the grant that allowed the call, or of the one
	// the answer gave (stored ones only).
	Grant string `json:"grant,omitempty"`
	// Scope says in words what was allowed: this call, or what the
	// grant allows.
	Scope  string `json:"scope,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Config configures a [Decider].
type Config struct {
	// Timeout bounds the wait for one answer (approvals.timeout); 0 is
	// DefaultTimeout.
	Timeout time.Duration
	// MaxPending bounds the calls of one session waiting for an answer
	// at once (approvals.max_pending); more are denied at once. 0 is
	// DefaultMaxPending.
	MaxPending int
	// Store holds the workspace and always grants; nil: none, and
	// answers cannot keep such grants (they are kept for the session).
	Store *Store
	// Approver is asked when the setting says ask and no grant allows
	// the call; nil denies, with a hint naming `gatebridge grants`.
	Approver Approver
	// Settings overrides the gates' own settings by gate name (command
	// gates and http rules: approval in the config). A gate not named
	// here has the setting [SettingOf] finds.
	Settings map[string]Setting
	// Record, when set, receives every decision; Redact, when set,
	// hides secret values in its strings first, and in the arguments a
	// question shows (a call whose arguments hold one is offered the
	// session grant only).
	Record func(Record)
	Redact func(string) string
	// Commands is the command policy (policy.commands), checked again at
	// call time with the gate's real arguments ([cmdpolicy.Policy.CheckGate]):
	// deny refuses the call, ask asks as approval: ask would. nil: none.
	Commands *cmdpolicy.Policy
	// NoOne says why no one can be asked (for the error, "" for the
	// default), e.g. "no terminal to ask on".
	NoOne string
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Decider decides gate calls (see the package doc). It is safe for
// concurrent use by many sessions.
type Decider struct {
	cfg Config

	mu       sync.Mutex
	pending  map[string]int     // by session
	sessions map[string][]Grant // session grants, by session
}

// New returns a decider for cfg.
func New(cfg Config) *Decider {
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxPending = cmp.Or(cfg.MaxPending, DefaultMaxPending)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Decider{cfg: cfg, pending: map[string]int{}, sessions: map[string][]Grant{}}
}

// SettingOf is a gate's own setting: its [gates.ApprovalSetter], else
// Ask when it is a [gates.Approver] that needs approval, else Never.
func SettingOf(g gates.Gate) Setting {
	if s, ok := g.(gates.ApprovalSetter); ok {
		if v, err := ParseSetting(s.ApprovalSetting()); err == nil {
			return v
		}
		return Deny // a setting no one understands allows nothing
	}
	if a, ok := g.(gates.Approver); ok && a.NeedsApproval() {
		return Ask
	}
	return Never
}

// Setting is the setting that applies to g.
func (d *Decider) Setting(g gates.Gate) Setting {
	if s, ok := d.cfg.Settings[g.Spec().Name]; ok {
		return s
	}
	return SettingOf(g)
}

// Asks reports whether any gate of reg, or the command policy, may need
// someone to answer (a front end opens its terminal only then).
func (d *Decider) Asks(reg *gates.Registry) bool {
	if d.cfg.Commands.MayAsk() {
		return true
	}
	for _, sp := range reg.Specs() {
		if g, err := reg.Lookup(sp.Name); err == nil && d.Setting(g) == Ask {
			return true
		}
	}
	return false
}

// Call is one call to decide.
type Call struct {
	Gate               string
	Args               []string
	Session, Workspace string
	CallID             string
	// Approver, when set, is asked instead of Config.Approver: a front end
	// with one Approver per client (serve: each connection's).
	Approver Approver
}

// DeniedError is a call that was not allowed; it wraps gates.ErrDenied
// (exit 126).
type DeniedError struct {
	By     string
	Reason string
	hint   string
}

func (e *DeniedError) Error() string { return e.Reason }
func (e *DeniedError) Unwrap() error { return gates.ErrDenied }
func (e *DeniedError) Hint() string  { return e.hint }

// Decide says whether c, a call of g, may run: nil, or a *DeniedError.
func (d *Decider) Decide(ctx context.Context, g gates.Gate, c Call) error {
	setting := d.Setting(g)
	// The command policy again, with the real arguments: a script can
	// compute a gate's name, so the check of its text is not enough.
	pr := d.cfg.Commands.CheckGate(c.Gate, c.Args)
	if pr.Decision == cmdpolicy.Ask && setting == Never {
		setting = Ask
	}
	if setting == Never && pr.Decision == cmdpolicy.Allow {
		return nil
	}
	rec := Record{Kind: "approval", Session: c.Session, CallID: c.CallID, Gate: c.Gate,
		Args: d.capArgs(c.Args), ArgsBase64: lossless.List(d.capArgs(c.Args))}
	deny := func(by, reason, hint string) error {
		rec.Decision, rec.By, rec.Reason = "deny", by, reason
		d.record(rec)
		bridge.NoteDecidedBy(ctx, by)
		return &DeniedError{By: by, Reason: reason, hint: hint}
	}
	if pr.Decision == cmdpolicy.Deny {
		de, _ := cmdpolicy.IsDenied(pr.Err())
		return deny(ByPolicy, de.Error(), de.Hint())
	}
	rule := ""
	if pr.Decision == cmdpolicy.Ask {
		rule = pr.By()
	}
	if setting == Deny {
		return deny(ByConfig, "refused by its config (approval: deny)", "")
	}
	if ch, ok := g.(gates.ArgChecker); ok {
		// First: no grant and no answer lets arguments past the policy.
		if err := ch.CheckArgs(c.Args); err != nil {
			return deny(ByPolicy, err.Error(), "")
		}
	}
	now := d.cfg.Now()
	if gr, err := d.match(c, now); err != nil {
		return deny(ByConfig, err.Error(), "fix the grants file (gatebridge grants ls)")
	} else if gr != nil {
		rec.Decision, rec.By, rec.Grant, rec.Scope = "allow", ByGrant, gr.ID, gr.Describe()
		d.record(rec)
		bridge.NoteDecidedBy(ctx, ByGrant)
		return nil
	}
	hintAdd := fmt.Sprintf("to allow it without asking: gatebridge grants add %s --exact ARG... (see gatebridge grants --help)", c.Gate)
	ap := c.Approver
	if ap == nil {
		ap = d.cfg.Approver
	}
	if ap == nil {
		why := cmp.Or(d.cfg.NoOne, "no one to ask")
		needs := "needs approval (approval: ask)"
		if rule != "" {
			needs = "needs approval (" + rule + ")"
		}
		return deny(ByNoOne, needs+" and there is "+why, hintAdd)
	}
	d.mu.Lock()
	if d.pending[c.Session] >= d.cfg.MaxPending {
		d.mu.Unlock()
		return deny(ByLimit, fmt.Sprintf("%d calls of this session already wait for approval (approvals.max_pending)", d.cfg.MaxPending), "")
	}
	d.pending[c.Session]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.pending[c.Session]--; d.pending[c.Session] <= 0 {
			delete(d.pending, c.Session)
		}
		d.mu.Unlock()
	}()
	actx, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout, errNoAnswer)
	defer cancel()
	// The question shows the arguments redacted (with the local backend
	// the sandbox can read a secret, and the one asked may be a protocol
	// client that sees no secret value elsewhere); a call whose
	// arguments hold one is offered no grant naming them.
	shown, secret := d.redactArgs(c.Args)
	offers := d.offers(g, c, now)
	if secret {
		offers = offers[:1] // the session's, any arguments
	}
	req := &Request{Gate: c.Gate, Args: shown, Session: c.Session, Workspace: c.Workspace, CallID: c.CallID,
		Offers: offers, Rule: rule}
	ans, err := ap.Ask(actx, req)
	switch {
	case err != nil && ctx.Err() != nil:
		return deny(ByCanceled, "withdrawn: "+context.Cause(ctx).Error(), "")
	case err != nil && errors.Is(context.Cause(actx), errNoAnswer):
		return deny(ByTimeout, fmt.Sprintf("no answer within %v (approvals.timeout)", d.cfg.Timeout), hintAdd)
	case err != nil:
		return deny(ByNoOne, err.Error(), hintAdd)
	}
	rec.By = cmp.Or(ans.By, ByPerson)
	if !ans.Allow {
		return deny(rec.By, cmp.Or(ans.Reason, "denied by the "+rec.By), "")
	}
	rec.Decision, rec.Scope = "allow", "this call"
	bridge.NoteDecidedBy(ctx, rec.By)
	if ans.Grant != nil {
		gr, err := d.keep(*ans.Grant, c, ans.ConnectionOnly, now)
		if err != nil {
			// the call was allowed; the grant could not be kept
			rec.Reason = "grant not kept: " + err.Error()
		} else if gr != nil {
			rec.Grant, rec.Scope = gr.ID, gr.Describe()
		}
	}
	d.record(rec)
	return nil
}

var errNoAnswer = errors.New("approval: no answer in time")

// match returns the first grant that allows c: a session grant, then one
// from the store.
func (d *Decider) match(c Call, now time.Time) (*Grant, error) {
	d.mu.Lock()
	for _, g := range d.sessions[c.Session] {
		if g.Matches(c.Gate, c.Args, c.Session, c.Workspace, now) {
			d.mu.Unlock()
			return &g, nil
		}
	}
	d.mu.Unlock()
	if d.cfg.Store == nil {
		return nil, nil
	}
	list, err := d.cfg.Store.List(now)
	if err != nil {
		return nil, err
	}
	for _, g := range list {
		if g.Matches(c.Gate, c.Args, c.Session, c.Workspace, now) {
			return &g, nil
		}
	}
	return nil, nil
}

// keep stores the grant an answer gave.
func (d *Decider) keep(g Grant, c Call, connOnly bool, now time.Time) (*Grant, error) {
	if g.Gate != c.Gate {
		return nil, fmt.Errorf("the grant is for %s, not %s", lossless.Quote(g.Gate), lossless.Quote(c.Gate))
	}
	if g.Lifetime == LifeWorkspace && g.Workspace == "" {
		g.Workspace = c.Workspace
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if g.Lifetime == LifeCall {
		return nil, nil
	}
	if connOnly || g.Lifetime == LifeSession || d.cfg.Store == nil {
		g.Lifetime, g.Session, g.Workspace = LifeSession, c.Session, ""
		if g.ID == "" {
			g.ID = newID()
		}
		if err := g.Validate(); err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.sessions[c.Session] = append(d.sessions[c.Session], g)
		d.mu.Unlock()
		return &g, nil
	}
	g.ID = ""
	stored, err := d.cfg.Store.Add(g, now)
	if err != nil {
		return nil, err
	}
	return &stored, nil
}

// EndSession forgets the session grants of session.
func (d *Decider) EndSession(session string) {
	d.mu.Lock()
	delete(d.sessions, session)
	d.mu.Unlock()
}

// offers are the grants a person may give for c, narrowest first: the
// session (any arguments the policy allows), exactly these arguments in
// this workspace and always, and a pattern per argument from the gate's
// policy (gates.ArgPatterner) when it has one.
func (d *Decider) offers(g gates.Gate, c Call, now time.Time) []Grant {
	exact := append([]string{}, c.Args...)
	out := []Grant{{Gate: c.Gate, AnyArgs: true, Lifetime: LifeSession, Session: c.Session}}
	if d.cfg.Store == nil {
		return out
	}
	if c.Workspace != "" {
		out = append(out, Grant{Gate: c.Gate, Exact: exact, Lifetime: LifeWorkspace, Workspace: c.Workspace})
	}
	out = append(out, Grant{Gate: c.Gate, Exact: exact, Lifetime: LifeAlways})
	if p, ok := g.(gates.ArgPatterner); ok {
		if pats := p.ArgPatterns(c.Args); pats != nil && !allLiteral(pats, c.Args) {
			out = append(out, Grant{Gate: c.Gate, Patterns: pats, Lifetime: LifeAlways})
		}
	}
	for i := range out {
		out[i].Validate()
	}
	return out
}

// allLiteral reports whether the patterns say no more than the arguments.
func allLiteral(pats, args []string) bool {
	for i, p := range pats {
		if p != regexp.QuoteMeta(args[i]) {
			return false
		}
	}
	return true
}

func (d *Decider) record(r Record) {
	if d.cfg.Record == nil {
		return
	}
	r.Time = d.cfg.Now().UTC()
	if red := d.cfg.Redact; red != nil {
		r.Args = append([]string{}, r.Args...)
		for i, a := range r.Args {
			r.Args[i] = red(a)
		}
		r.ArgsBase64 = lossless.List(r.Args)
		if r.Command != nil {
			r.Command = append([]string{}, r.Command...)
			for i, a := range r.Command {
				r.Command[i] = red(a)
			}
		}
		r.Reason, r.Scope = red(r.Reason), red(r.Scope)
	}
	d.cfg.Record(r)
}

// redactArgs is args with secret values replaced (Config.Redact), and
// whether any was.
func (d *Decider) redactArgs(args []string) ([]string, bool) {
	if d.cfg.Redact == nil {
		return args, false
	}
	var out []string
	for i, a := range args {
		if r := d.cfg.Redact(a); r != a {
			if out == nil {
				out = append([]string{}, args...)
			}
			out[i] = r
		}
	}
	if out == nil {
		return args, false
	}
	return out, true
}

// capArgs caps what a record keeps of the arguments: 64 of 256 bytes,
// redacted before the cut (the sandbox chooses what comes before a
// secret: a cut through it would keep its first bytes).
func (d *Decider) capArgs(args []string) []string {
	out := make([]string, 0, min(len(args), 64))
	for i, a := range args {
		if i == 64 {
			break
		}
		if d.cfg.Redact != nil {
			a = d.cfg.Redact(a)
		}
		out = append(out, lossless.Cut(a, 256))
	}
	return out
}

// ApproveFunc adapts d to the dispatcher's hook (bridge.Config.Approve)
// for one session, named by session() when a call comes (a session's id
// is known once it is open): the gate is looked up in reg, its words
// (after the JSON-object convention) decided.
func (d *Decider) ApproveFunc(reg *gates.Registry, workspace string, session func() string) bridge.ApproveFunc {
	return func(ctx context.Context, spec gates.Spec, req *bridge.Request) error {
		g, err := reg.Lookup(spec.Name)
		if err != nil {
			return err
		}
		return d.Decide(ctx, g, Call{Gate: spec.Name, Args: req.Args, Session: session(), Workspace: workspace, CallID: req.ID})
	}
}

// String of a setting.
func (s Setting) String() string { return string(s) }

// Refuse replaces in reg each gate whose setting in settings is Deny by
// one that refuses every call (exit 126), whatever front end calls it,
// asking or not. The replaced gate is closed (a [gates.Closer]).
func Refuse(reg *gates.Registry, settings map[string]Setting) error {
	for name, s := range settings {
		if s != Deny {
			continue
		}
		g, err := reg.Lookup(name)
		if err != nil {
			continue // not built (an MCP tool left out, say)
		}
		if err := reg.Unregister(name); err != nil {
			return err
		}
		if err := reg.Register(refused{g.Spec()}); err != nil {
			return err
		}
	}
	return nil
}

// refused is a gate with approval: deny.
type refused struct{ spec gates.Spec }

var _ gates.ApprovalSetter = refused{}

func (r refused) Spec() gates.Spec        { return r.spec }
func (r refused) ApprovalSetting() string { return gates.ApprovalDeny }
func (r refused) Call(context.Context, *gates.Call) (int, error) {
	return gates.ExitDenied, gates.Deniedf("%s: refused by its config (approval: deny)", r.spec.Name)
}

// DecideCommand asks about argv, a command the command policy marks ask
// (r, from CheckArgv or CheckScript), before it starts: allow or deny,
// nothing kept. ap, when set, is asked instead of Config.Approver. It
// returns nil when allowed, else an error that wraps r's
// *cmdpolicy.DeniedError (exit 126) and says who refused.
func (d *Decider) DecideCommand(ctx context.Context, argv []string, r cmdpolicy.Result, session string, ap Approver) error {
	if r.Decision == cmdpolicy.Allow {
		return nil
	}
	pe, _ := cmdpolicy.IsDenied(r.Err())
	rec := Record{Kind: "approval", Session: session, Command: d.capArgs(argv), Args: []string{}}
	deny := func(by, reason, hint string) error {
		rec.Decision, rec.By, rec.Reason = "deny", by, reason
		d.record(rec)
		return &CommandDeniedError{Policy: pe, By: by, Reason: reason, hint: hint}
	}
	if r.Decision == cmdpolicy.Deny {
		return deny(ByPolicy, "", pe.Hint())
	}
	if ap == nil {
		ap = d.cfg.Approver
	}
	if ap == nil {
		why := cmp.Or(d.cfg.NoOne, "no one to ask")
		return deny(ByNoOne, "there is "+why, "run it where gatebridge can ask you (a terminal), or change policy.commands in the config "+
			"(`gatebridge policy check` shows the rule); grants (gatebridge grants) are for gates, not commands")
	}
	d.mu.Lock()
	if d.pending[session] >= d.cfg.MaxPending {
		d.mu.Unlock()
		return deny(ByLimit, fmt.Sprintf("%d questions of this session already wait (approvals.max_pending)", d.cfg.MaxPending), "")
	}
	d.pending[session]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.pending[session]--; d.pending[session] <= 0 {
			delete(d.pending, session)
		}
		d.mu.Unlock()
	}()
	actx, cancel := context.WithTimeoutCause(ctx, d.cfg.Timeout, errNoAnswer)
	defer cancel()
	// Rule says which command of a script asks, and by which rule.
	shown, _ := d.redactArgs(argv)
	ans, err := ap.Ask(actx, &Request{Command: shown, Args: []string{}, Rule: pe.Error(), Session: session})
	switch {
	case err != nil && ctx.Err() != nil:
		return deny(ByCanceled, "withdrawn: "+context.Cause(ctx).Error(), "")
	case err != nil && errors.Is(context.Cause(actx), errNoAnswer):
		return deny(ByTimeout, fmt.Sprintf("no answer within %v (approvals.timeout)", d.cfg.Timeout), "")
	case err != nil:
		return deny(ByNoOne, err.Error(), "")
	}
	rec.By = cmp.Or(ans.By, ByPerson)
	if !ans.Allow {
		return deny(rec.By, cmp.Or(ans.Reason, "denied by the "+rec.By), "")
	}
	rec.Decision, rec.Scope = "allow", "this command"
	d.record(rec)
	return nil
}

// CommandDeniedError is a command the command policy asked about and
// that was not allowed; it wraps the policy's *cmdpolicy.DeniedError, so
// front ends report it as a policy refusal (exit 126, policy_denied).
type CommandDeniedError struct {
	Policy *cmdpolicy.DeniedError
	By     string
	Reason string
	hint   string
}

func (e *CommandDeniedError) Error() string {
	if e.Reason == "" {
		return e.Policy.Error()
	}
	return e.Policy.Error() + ": " + e.Reason
}
func (e *CommandDeniedError) Unwrap() error { return e.Policy }
func (e *CommandDeniedError) Hint() string  { return e.hint }
