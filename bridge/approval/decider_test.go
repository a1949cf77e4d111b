package approval

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/gates"
)

// gitLog is a command gate with a policy: -n N and an optional REV.
func gitLog(t *testing.T) gates.Gate {
	t.Helper()
	g, err := gates.NewCommand(gates.CommandSpec{Name: "git_log", Command: []string{"true"},
		Options:      []gates.OptionRule{{Name: "-n", Value: "[0-9]+"}},
		Args:         []gates.ArgRule{{Name: "REV", Pattern: "[a-z]+", Optional: true}},
		EndOfOptions: "--"})
	if err != nil {
		t.Skipf("no command gates here: %v", err)
	}
	return g
}

// answerer is an Approver that answers from a function and counts.
type answerer struct {
	mu   sync.Mutex
	asks []*Request
	fn   func(ctx context.Context, r *Request) (Answer, error)
}

func (a *answerer) Ask(ctx context.Context, r *Request) (Answer, error) {
	a.mu.Lock()
	a.asks = append(a.asks, r)
	a.mu.Unlock()
	return a.fn(ctx, r)
}

func (a *answerer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asks)
}

func allow(context.Context, *Request) (Answer, error) { return Answer{Allow: true}, nil }

func recorder() (*[]Record, func(Record)) {
	var mu sync.Mutex
	var recs []Record
	return &recs, func(r Record) { mu.Lock(); recs = append(recs, r); mu.Unlock() }
}

func TestDecideOrder(t *testing.T) {
	g := gitLog(t)
	store := newStore(t)
	recs, rec := recorder()
	a := &answerer{fn: allow}
	d := New(Config{Store: store, Approver: a, Settings: map[string]Setting{"git_log": Ask}, Record: rec})
	call := Call{Gate: "git_log", Args: []string{"-n", "5"}, Session: "s1", Workspace: "/ws"}
	ctx := context.Background()

	// no grant: asked
	if err := d.Decide(ctx, g, call); err != nil || a.count() != 1 {
		t.Fatalf("ask: %v, %d asks", err, a.count())
	}
	// a grant: allowed without asking, its id recorded
	gr, err := store.Add(Grant{Gate: "git_log", Patterns: []string{"-n", "[0-9]+"}, Lifetime: LifeAlways}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Decide(ctx, g, call); err != nil || a.count() != 1 {
		t.Fatalf("grant: %v, %d asks", err, a.count())
	}
	if last := (*recs)[len(*recs)-1]; last.By != ByGrant || last.Grant != gr.ID || last.Decision != "allow" || !strings.Contains(last.Scope, "matching") {
		t.Errorf("record %+v", last)
	}
	// deny beats the grant
	d2 := New(Config{Store: store, Approver: a, Settings: map[string]Setting{"git_log": Deny}, Record: rec})
	var de *DeniedError
	if err := d2.Decide(ctx, g, call); !errors.As(err, &de) || de.By != ByConfig || !errors.Is(err, gates.ErrDenied) {
		t.Fatalf("deny setting with a grant: %v", err)
	}
	// never: no question, no record
	n := len(*recs)
	d3 := New(Config{Store: store, Approver: a, Record: rec})
	if err := d3.Decide(ctx, g, call); err != nil || len(*recs) != n || a.count() != 1 {
		t.Fatalf("never: %v", err)
	}
}

// Attack: a grant pattern never widens the gate's argument policy: a
// grant for any "-n" value, or for anything at all, does not let
// "-n 5; rm" or an option the policy does not know through.
func TestGrantNeverWidensPolicy(t *testing.T) {
	g := gitLog(t)
	store := newStore(t)
	for _, gr := range []Grant{
		{Gate: "git_log", Patterns: []string{"-n", ".*"}, Lifetime: LifeAlways},
		{Gate: "git_log", Patterns: []string{".*", ".*"}, Lifetime: LifeAlways},
		{Gate: "git_log", AnyArgs: true, Lifetime: LifeAlways},
		{Gate: "git_log", Exact: []string{"--output=/etc/passwd"}, Lifetime: LifeAlways},
	} {
		if _, err := store.Add(gr, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	a := &answerer{fn: allow}
	d := New(Config{Store: store, Approver: a, Settings: map[string]Setting{"git_log": Ask}})
	for _, args := range [][]string{{"-n", "5; rm -rf ~"}, {"--output=/etc/passwd"}, {"-n", "5", "HEAD~1"}} {
		err := d.Decide(context.Background(), g, Call{Gate: "git_log", Args: args, Session: "s"})
		var de *DeniedError
		if !errors.As(err, &de) || de.By != ByPolicy {
			t.Errorf("%q: %v, want a policy denial", args, err)
		}
	}
	if a.count() != 0 {
		t.Errorf("asked %d times about calls the policy refuses", a.count())
	}
}

// A grant removed from the file stops matching at once, in a decider
// that has been running (and read the file) all along.
func TestDeletedGrantStopsMatching(t *testing.T) {
	g := gitLog(t)
	store := newStore(t)
	recs, rec := recorder()
	d := New(Config{Store: store, Settings: map[string]Setting{"git_log": Ask}, Record: rec, NoOne: "no terminal"})
	gr, err := store.Add(Grant{Gate: "git_log", Exact: []string{"-n", "1"}, Lifetime: LifeAlways}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	call := Call{Gate: "git_log", Args: []string{"-n", "1"}, Session: "s"}
	if err := d.Decide(context.Background(), g, call); err != nil {
		t.Fatal(err)
	}
	// removed by another process: `gatebridge grants rm`
	other, _ := NewStore(store.Path())
	if err := other.Remove(gr.ID); err != nil {
		t.Fatal(err)
	}
	err = d.Decide(context.Background(), g, call)
	var de *DeniedError
	if !errors.As(err, &de) || de.By != ByNoOne || !strings.Contains(de.Hint(), "gatebridge grants add git_log") {
		t.Fatalf("after rm: %v", err)
	}
	if last := (*recs)[len(*recs)-1]; last.Decision != "deny" || last.By != ByNoOne {
		t.Errorf("record %+v", last)
	}
}

func TestAnswerGrantsAreKept(t *testing.T) {
	g := gitLog(t)
	store := newStore(t)
	var give func(r *Request) *Grant
	a := &answerer{fn: func(_ context.Context, r *Request) (Answer, error) { return Answer{Allow: true, Grant: give(r)}, nil }}
	d := New(Config{Store: store, Approver: a, Settings: map[string]Setting{"git_log": Ask}})
	ctx := context.Background()
	offer := func(r *Request, pred func(Grant) bool) *Grant {
		for _, o := range r.Offers {
			if pred(o) {
				return &o
			}
		}
		t.Fatalf("no such offer in %+v", r.Offers)
		return nil
	}
	// session: any arguments, this session only
	give = func(r *Request) *Grant { return offer(r, func(o Grant) bool { return o.Lifetime == LifeSession }) }
	d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "1"}, Session: "s1"})
	d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"main"}, Session: "s1"})
	if a.count() != 1 {
		t.Errorf("session grant: %d asks, want 1", a.count())
	}
	d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"main"}, Session: "s2"})
	if a.count() != 2 {
		t.Errorf("the session grant leaked to another session")
	}
	// the policy's patterns, always: stored, and used next time
	give = func(r *Request) *Grant { return offer(r, func(o Grant) bool { return o.Patterns != nil }) }
	d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "7", "dev"}, Session: "s3"})
	l, _ := store.List(time.Now())
	if len(l) != 1 || strings.Join(l[0].Patterns, " ") != `-n (?:[0-9]+) (?:[a-z]+)` {
		t.Fatalf("stored %+v", l)
	}
	d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "99", "main"}, Session: "s4"})
	if a.count() != 3 {
		t.Errorf("pattern grant not used: %d asks", a.count())
	}
	// connection only: kept for the session though its lifetime is always
	a.fn = func(_ context.Context, r *Request) (Answer, error) {
		return Answer{Allow: true, ConnectionOnly: true, Grant: offer(r, func(o Grant) bool { return o.Lifetime == LifeAlways && o.Exact != nil })}, nil
	}
	d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"x"}, Session: "s5"})
	if l, _ := store.List(time.Now()); len(l) != 1 {
		t.Errorf("a connection-only grant was stored: %+v", l)
	}
}

func TestBounds(t *testing.T) {
	g := gitLog(t)
	recs, rec := recorder()
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	a := &answerer{fn: func(ctx context.Context, r *Request) (Answer, error) {
		started <- struct{}{}
		select {
		case <-release:
			return Answer{Allow: true}, nil
		case <-ctx.Done():
			return Answer{}, context.Cause(ctx)
		}
	}}
	d := New(Config{Approver: a, MaxPending: 2, Settings: map[string]Setting{"git_log": Ask}, Record: rec})
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- d.Decide(context.Background(), g, Call{Gate: "git_log", Session: "flood"}) }()
	}
	<-started
	<-started
	// a third from the same session is denied at once
	var de *DeniedError
	if err := d.Decide(context.Background(), g, Call{Gate: "git_log", Session: "flood"}); !errors.As(err, &de) || de.By != ByLimit {
		t.Fatalf("over max_pending: %v", err)
	}
	// another session is not blocked by the flood
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Decide(ctx, g, Call{Gate: "git_log", Session: "other"}) }()
	<-started
	// a cancelled call withdraws its question
	cancel()
	if err := <-done; !errors.As(err, &de) || de.By != ByCanceled {
		t.Fatalf("cancelled: %v", err)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// a question no one answers is denied after the timeout
	d = New(Config{Approver: &answerer{fn: func(ctx context.Context, _ *Request) (Answer, error) {
		<-ctx.Done()
		return Answer{}, ctx.Err()
	}}, Timeout: time.Millisecond, Settings: map[string]Setting{"git_log": Ask}, Record: rec})
	if err := d.Decide(context.Background(), g, Call{Gate: "git_log", Session: "s"}); !errors.As(err, &de) || de.By != ByTimeout {
		t.Fatalf("timeout: %v", err)
	}
	if last := (*recs)[len(*recs)-1]; last.By != ByTimeout || last.Decision != "deny" || last.Time.IsZero() {
		t.Errorf("record %+v", last)
	}
}

func TestSettingOfMCPLikeGates(t *testing.T) {
	for _, c := range []struct {
		g    gates.Gate
		want Setting
	}{
		{settingGate{"deny"}, Deny}, {settingGate{"ask"}, Ask}, {settingGate{""}, Never}, {settingGate{"bogus"}, Deny},
	} {
		if got := SettingOf(c.g); got != c.want {
			t.Errorf("%v: %v, want %v", c.g, got, c.want)
		}
	}
}

type settingGate struct{ s string }

func (settingGate) Spec() gates.Spec                               { return gates.Spec{Name: "t"} }
func (settingGate) Call(context.Context, *gates.Call) (int, error) { return 0, nil }
func (g settingGate) ApprovalSetting() string                      { return g.s }

var _ = filepath.Join

// approval: deny refuses on a front end that does not ask the decider
// (serve, mcp): the gate itself is replaced.
func TestRefuse(t *testing.T) {
	reg := gates.NewRegistry()
	ran := false
	reg.MustRegister(gates.Func(gates.Spec{Name: "push"}, func(context.Context, *gates.Call) (int, error) { ran = true; return 0, nil }))
	reg.MustRegister(gates.Func(gates.Spec{Name: "log"}, func(context.Context, *gates.Call) (int, error) { return 0, nil }))
	if err := Refuse(reg, map[string]Setting{"push": Deny, "log": Ask, "gone": Deny}); err != nil {
		t.Fatal(err)
	}
	g, _ := reg.Lookup("push")
	if _, err := g.Call(context.Background(), &gates.Call{}); !errors.Is(err, gates.ErrDenied) || ran || SettingOf(g) != Deny {
		t.Errorf("push: %v, ran %v", err, ran)
	}
	if g, _ := reg.Lookup("log"); SettingOf(g) != Never {
		t.Error("log was replaced")
	}
}

// The command policy is checked at call time with the gate's real
// arguments: deny refuses (no one asked, whatever grant), ask asks a
// gate whose own setting is never (the question names the rule), and a
// per-call Approver is asked instead of the config's.
func TestCommandPolicyAtCallTime(t *testing.T) {
	g := gitLog(t)
	pol, err := cmdpolicy.New(cmdpolicy.Config{Rules: []cmdpolicy.Rule{
		{Command: "git_log", Args: []string{"-n", "666"}, Decision: "deny"},
		{Command: "git_log", Args: []string{"-n", "7"}, Decision: "ask"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	if _, err := store.Add(Grant{Gate: "git_log", AnyArgs: true, Lifetime: LifeAlways}, time.Now()); err != nil {
		t.Fatal(err)
	}
	recs, rec := recorder()
	fallback := &answerer{fn: allow}
	d := New(Config{Approver: fallback, Commands: pol, Record: rec})
	ctx := context.Background()
	if err := d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "1"}, Session: "s"}); err != nil {
		t.Fatalf("no rule: %v", err)
	}
	err = d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "666"}, Session: "s"})
	var de *DeniedError
	if !errors.As(err, &de) || de.By != ByPolicy || !strings.Contains(err.Error(), "rule 0") || !errors.Is(err, gates.ErrDenied) {
		t.Fatalf("deny rule: %v", err)
	}
	d2 := New(Config{Store: store, Commands: pol})
	if err := d2.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "666"}, Session: "s"}); !errors.As(err, &de) {
		t.Fatalf("a grant let a policy deny through: %v", err)
	}
	per := &answerer{fn: func(context.Context, *Request) (Answer, error) { return Answer{Reason: "no"}, nil }}
	err = d.Decide(ctx, g, Call{Gate: "git_log", Args: []string{"-n", "7"}, Session: "s", Approver: per})
	if !errors.As(err, &de) || per.count() != 1 || fallback.count() != 0 || !strings.Contains(per.asks[0].Rule, "rule 1") {
		t.Fatalf("ask rule: %v (asked %d, fallback %d)", err, per.count(), fallback.count())
	}
	if last := (*recs)[len(*recs)-1]; last.By != ByPerson || last.Decision != "deny" {
		t.Errorf("record %+v", last)
	}
}

// A command the policy asks about: the Approver sees the command and the
// rule, its no is a policy refusal, no Approver denies with a hint.
func TestDecideCommand(t *testing.T) {
	pol, _ := cmdpolicy.New(cmdpolicy.Config{Rules: []cmdpolicy.Rule{{Command: "git", Args: []string{"push"}, Decision: "ask"}}})
	argv := []string{"git", "push", "origin"}
	r := pol.CheckArgv(argv)
	a := &answerer{fn: allow}
	d := New(Config{Approver: a})
	if err := d.DecideCommand(context.Background(), argv, r, "s", nil); err != nil || a.count() != 1 ||
		strings.Join(a.asks[0].Command, " ") != "git push origin" || !strings.Contains(a.asks[0].Rule, "rule 0") {
		t.Fatalf("allowed: %v %+v", err, a.asks)
	}
	if p := Prompt(a.asks[0], ""); !strings.Contains(p, "command git push origin") || !strings.Contains(p, "[y/n]") || strings.Contains(p, "  s  ") {
		t.Fatalf("prompt %q", p)
	}
	a.fn = func(context.Context, *Request) (Answer, error) { return Answer{}, nil }
	err := d.DecideCommand(context.Background(), argv, r, "s", nil)
	if _, ok := cmdpolicy.IsDenied(err); !ok || !strings.Contains(err.Error(), "denied by the person") {
		t.Fatalf("denied: %v", err)
	}
	err = New(Config{NoOne: "no terminal to ask on"}).DecideCommand(context.Background(), argv, r, "s", nil)
	if _, ok := cmdpolicy.IsDenied(err); !ok || !strings.Contains(err.Error(), "no terminal") || hintOf(err) == "" {
		t.Fatalf("no one: %v", err)
	}
}

func hintOf(err error) string {
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}

// The record of a decision cuts each argument at 256 bytes; the sandbox
// chooses how much comes before a secret, and a cut made before the
// redaction kept the secret's first bytes.
func TestRecordCutLeavesNoPartialSecret(t *testing.T) {
	const secret = "ghp_0123456789abcdefSECRET"
	red := func(s string) string { return strings.ReplaceAll(s, secret, "[secret:gh]") }
	recs, rec := recorder()
	g := gates.Func(gates.Spec{Name: "ask_me"}, func(context.Context, *gates.Call) (int, error) { return 0, nil })
	d := New(Config{Approver: &answerer{fn: allow}, Settings: map[string]Setting{"ask_me": Ask}, Record: rec, Redact: red})
	for pad := 256 - len(secret); pad <= 256; pad++ {
		arg := strings.Repeat("a", pad) + secret
		if err := d.Decide(context.Background(), g, Call{Gate: "ask_me", Args: []string{arg}, Session: "s"}); err != nil {
			t.Fatal(err)
		}
		d.DecideCommand(context.Background(), []string{"x", arg}, cmdpolicy.Result{Decision: cmdpolicy.Ask}, "s", nil)
	}
	for _, r := range *recs {
		for _, s := range append(r.Args, r.Command...) {
			if strings.Contains(s, secret[:8]) {
				t.Fatalf("a record holds the secret's first bytes: %q", s)
			}
		}
	}
}

// The question (a protocol client's approval/request, the terminal's
// prompt) shows a secret the sandbox put into the arguments redacted,
// and offers no grant that names it.
func TestQuestionRedacted(t *testing.T) {
	const secret = "ghp_0123456789abcdefSECRET"
	red := func(s string) string { return strings.ReplaceAll(s, secret, "[secret:gh]") }
	a := &answerer{fn: allow}
	g := gates.Func(gates.Spec{Name: "ask_me"}, func(context.Context, *gates.Call) (int, error) { return 0, nil })
	d := New(Config{Store: newStore(t), Approver: a, Settings: map[string]Setting{"ask_me": Ask}, Redact: red})
	if err := d.Decide(context.Background(), g, Call{Gate: "ask_me", Args: []string{"-n", "5", "x" + secret}, Session: "s", Workspace: "/ws"}); err != nil {
		t.Fatal(err)
	}
	d.DecideCommand(context.Background(), []string{"curl", "-H", "Authorization: " + secret}, cmdpolicy.Result{Decision: cmdpolicy.Ask}, "s", nil)
	if a.count() != 2 {
		t.Fatalf("%d questions, want 2", a.count())
	}
	for _, r := range a.asks {
		all := append(append([]string{}, r.Args...), r.Command...)
		for _, o := range r.Offers {
			all = append(append(append(all, o.Exact...), o.Patterns...), o.Describe())
		}
		for _, s := range all {
			if strings.Contains(s, secret) {
				t.Fatalf("the question holds the secret: %q", s)
			}
		}
	}
	if r := a.asks[0]; len(r.Args) != 3 || r.Args[2] != "x[secret:gh]" || len(r.Offers) != 1 || !r.Offers[0].AnyArgs {
		t.Errorf("question %+v", r)
	}
}
