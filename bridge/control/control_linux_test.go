package control_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// newHost is a host offering the local backend.
func newHost(t *testing.T) *control.Host {
	t.Helper()
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	return control.New(control.Options{Backends: reg, Process: sandbox.Spec{KillGrace: 500 * time.Millisecond}, Logf: t.Logf})
}

// open opens a local sandbox on a fresh workspace; it is closed with the
// test.
func open(t *testing.T, h *control.Host, spec control.SandboxSpec) *control.Sandbox {
	t.Helper()
	spec.Backend, spec.Workspace = "local", t.TempDir()
	if spec.ID == "" {
		spec.ID = "sb"
	}
	sb, err := h.Open(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

// buffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

func wait(t *testing.T, p *control.Process) control.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// A process through the Go API: stdin written before and after the
// start, output to the caller's writers and the snapshot, the exit
// reported to OnExit after the output, then to Wait.
func TestProcessIO(t *testing.T) {
	h := newHost(t)
	sb := open(t, h, control.SandboxSpec{Env: []string{"FROM_SANDBOX=s"}})
	if sb.Backend() != "local" || sb.WorkspaceInside() == "" {
		t.Fatalf("backend %q inside %q", sb.Backend(), sb.WorkspaceInside())
	}
	in := h.NewStdin()
	if err := in.Send([]byte("before start\n")); err != nil {
		t.Fatal(err)
	}
	var out, errOut buffer
	var atExit string
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p", Script: `cat; echo "$FROM_SANDBOX$FROM_PROCESS" >&2; exit 3`,
		Env: []string{"FROM_PROCESS=p"}, Stdin: in, Stdout: &out, Stderr: &errOut,
		OnExit: func(control.Exit) { atExit = out.String() + "|" + errOut.String() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write([]byte("after start\n")); err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	ex := wait(t, p)
	if ex.Code != 3 || ex.Err != nil || ex.TimedOut {
		t.Fatalf("exit %+v", ex)
	}
	if out.String() != "before start\nafter start\n" || errOut.String() != "sp\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
	if atExit != "before start\nafter start\n|sp\n" {
		t.Fatalf("OnExit saw %q: not all the output", atExit)
	}
	s := p.Snapshot()
	if s.Running || s.Exit.Code != 3 || string(s.Stdout) != out.String() || string(s.Stderr) != "sp\n" || s.OmittedBytes != 0 {
		t.Fatalf("snapshot %+v", s)
	}
	if err := p.Write([]byte("late")); control.KindOf(err) != control.KindInvalid {
		t.Fatalf("write after exit: %v", err)
	}
}

// Signal reaches the command; the exit names it. A signal to an exited
// process is KindNotFound.
func TestProcessSignal(t *testing.T) {
	sb := open(t, newHost(t), control.SandboxSpec{})
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p", Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ex := wait(t, p); ex.Code != 128+int(syscall.SIGTERM) || ex.Signal != "TERM" {
		t.Fatalf("exit %+v", ex)
	}
	if err := p.Signal(syscall.SIGTERM); control.KindOf(err) != control.KindNotFound {
		t.Fatalf("signal after exit: %v", err)
	}
}

// A bad cwd or argv is refused before anything runs, naming the field.
func TestStartRefuses(t *testing.T) {
	sb := open(t, newHost(t), control.SandboxSpec{})
	for _, spec := range []control.ProcessSpec{{Argv: []string{"true"}, Cwd: "../.."}, {Argv: []string{"true"}, Cwd: "/etc"}, {}} {
		_, err := sb.Start(context.Background(), spec)
		var e *control.Error
		if !errors.As(err, &e) || e.Kind != control.KindInvalid || e.Field == "" {
			t.Errorf("%+v: %v", spec, err)
		}
	}
}

// answer answers runtime gates with a function.
type answer func(ctx context.Context, r *control.GateRequest) (*control.GateAnswer, error)

func (f answer) AnswerGate(ctx context.Context, r *control.GateRequest) (*control.GateAnswer, error) {
	return f(ctx, r)
}

// approve decides with a function.
type approve func(ctx context.Context, r *control.ApprovalRequest) (approval.Answer, error)

func (f approve) Ask(ctx context.Context, r *control.ApprovalRequest) (approval.Answer, error) {
	return f(ctx, r)
}

// A gate registered at run time, after the sandbox opened, is offered
// in it; the Answerer gets the call with its caller, and its answer
// reaches the command.
func TestRuntimeGate(t *testing.T) {
	h := newHost(t)
	var mu sync.Mutex
	var caller *control.Process
	set := h.NewGateSet(answer(func(_ context.Context, r *control.GateRequest) (*control.GateAnswer, error) {
		mu.Lock()
		caller = r.Process
		mu.Unlock()
		return &control.GateAnswer{Stdout: []byte("got " + strings.Join(r.Args, "|") + "\n"), ExitCode: 4}, nil
	}))
	sb := open(t, h, control.SandboxSpec{Gates: set})
	if err := set.Register(control.RuntimeGate{Name: "lookup", Summary: "look up"}); err != nil {
		t.Fatal(err)
	}
	if err := set.Register(control.RuntimeGate{Name: "lookup"}); control.KindOf(err) != control.KindConflict {
		t.Fatalf("second registration: %v", err)
	}
	var out buffer
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "p", Script: "lookup 'a b' c; echo rc=$?", Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if ex := wait(t, p); ex.Code != 0 || out.String() != "got a b|c\nrc=4\n" {
		t.Fatalf("exit %+v stdout %q", ex, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if caller != p {
		t.Fatalf("the gate's caller is %v, want the process", caller)
	}
	infos, err := set.List()
	if err != nil || len(infos) != 1 || infos[0].Kind != control.KindRuntime {
		t.Fatalf("List = %+v, %v", infos, err)
	}
}

// A gate that needs approval asks the sandbox's Approver; its refusal
// reaches the command (126) and the gate never runs; a sandbox without
// an Approver refuses it; a session grant in the answer is asked once.
func TestApprover(t *testing.T) {
	h := newHost(t)
	var mu sync.Mutex
	answered, asked := 0, 0
	set := h.NewGateSet(answer(func(context.Context, *control.GateRequest) (*control.GateAnswer, error) {
		mu.Lock()
		answered++
		mu.Unlock()
		return &control.GateAnswer{}, nil
	}))
	if err := set.Register(control.RuntimeGate{Name: "risky", Approval: true}); err != nil {
		t.Fatal(err)
	}
	run := func(sb *control.Sandbox) (control.Exit, string) {
		var out, errOut buffer
		p, err := sb.Start(context.Background(), control.ProcessSpec{Script: "risky; echo rc=$?; risky; echo rc=$?", Stdout: &out, Stderr: &errOut})
		if err != nil {
			t.Fatal(err)
		}
		return wait(t, p), out.String() + errOut.String()
	}
	deny := open(t, h, control.SandboxSpec{ID: "deny", Gates: set, Approver: approve(func(_ context.Context, r *control.ApprovalRequest) (approval.Answer, error) {
		if r.Gate != "risky" || r.Sandbox.ID() != "deny" || len(r.Offers) == 0 {
			t.Errorf("approval request %+v", r)
		}
		return approval.Answer{Reason: "not on fridays"}, nil
	})})
	if _, out := run(deny); !strings.Contains(out, "rc=126\n") || !strings.Contains(out, "not on fridays") {
		t.Fatalf("denied: %q", out)
	}
	none := open(t, h, control.SandboxSpec{ID: "none", Gates: set})
	if _, out := run(none); !strings.Contains(out, "rc=126\n") {
		t.Fatalf("no approver: %q", out)
	}
	mu.Lock()
	if answered != 0 {
		t.Fatalf("a refused gate ran %d times", answered)
	}
	mu.Unlock()
	once := open(t, h, control.SandboxSpec{ID: "once", Gates: set, Approver: approve(func(_ context.Context, r *control.ApprovalRequest) (approval.Answer, error) {
		mu.Lock()
		asked++
		mu.Unlock()
		return approval.Answer{Allow: true, Grant: &r.Offers[0]}, nil
	})})
	if _, out := run(once); strings.Count(out, "rc=0\n") != 2 {
		t.Fatalf("allowed: %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 || answered != 2 {
		t.Fatalf("asked %d times, answered %d; want 1 and 2", asked, answered)
	}
}

// Auto fails closed with one error and hint for every front end; a
// backend that is not registered is the caller's mistake.
func TestChoose(t *testing.T) {
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	_, err := control.Choose(context.Background(), reg, control.Choice{Backend: control.Auto, HowLocal: "say local"})
	if !errors.Is(err, control.ErrNoSandbox) || !errors.Is(err, sandbox.ErrUnavailable) || control.KindOf(err) != control.KindUnavailable ||
		!strings.HasSuffix(hint.Of(err), "say local") {
		t.Fatalf("auto, nothing isolating: %v (hint %q)", err, hint.Of(err))
	}
	c, err := control.Choose(context.Background(), reg, control.Choice{Backend: control.Auto, AllowUnsandboxed: true})
	if err != nil || c.Entry.Name != "local" || !strings.HasPrefix(c.Reason, "auto: ") {
		t.Fatalf("auto, unsandboxed allowed: %+v, %v", c, err)
	}
	c.Close()
	if _, err := control.Choose(context.Background(), reg, control.Choice{Backend: "nosuch"}); control.KindOf(err) != control.KindInvalid {
		t.Fatalf("unknown backend: %v", err)
	}
}

// AskCommand asks the sandbox's Approver about a command the command
// policy marks ask (for process/start): the question carries the command
// and the rule; a no is a policy refusal; no Approver refuses at once.
func TestAskCommand(t *testing.T) {
	h := newHost(t)
	pol, err := cmdpolicy.New(cmdpolicy.Config{Rules: []cmdpolicy.Rule{{Command: "git", Args: []string{"push"}, Decision: "ask"}}})
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"sh", "-c", "git push origin"}
	r := pol.CheckArgv(argv)
	var got *control.ApprovalRequest
	sb := open(t, h, control.SandboxSpec{Approver: approve(func(_ context.Context, req *control.ApprovalRequest) (approval.Answer, error) {
		got = req
		return approval.Answer{Allow: req.Command[0] == "sh"}, nil
	})})
	if err := sb.AskCommand(context.Background(), argv, r); err != nil || got == nil || got.Sandbox != sb || got.Process != nil ||
		!strings.Contains(got.Rule, "rule 0") {
		t.Fatalf("asked %+v: %v", got, err)
	}
	if err := sb.AskCommand(context.Background(), []string{"git", "push"}, pol.CheckArgv([]string{"git", "push"})); err == nil {
		t.Fatal("a no allowed the command")
	} else if _, ok := cmdpolicy.IsDenied(err); !ok {
		t.Fatalf("not a policy refusal: %v", err)
	}
	none := open(t, h, control.SandboxSpec{ID: "none"})
	if _, ok := cmdpolicy.IsDenied(none.AskCommand(context.Background(), argv, r)); !ok {
		t.Fatal("no Approver: not refused")
	}
}
