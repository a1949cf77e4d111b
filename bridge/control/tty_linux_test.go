package control_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

func crlf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// A process on a terminal: a terminal under tty and none without, its
// size, a resize the command sees, stdin written through Write, its exit
// code, and stderr in the one stream.
func TestProcessTTY(t *testing.T) {
	h := newHost(t)
	sb := open(t, h, control.SandboxSpec{})
	ctx := context.Background()

	p, err := sb.Start(ctx, control.ProcessSpec{ID: "no", Script: "test -t 0 && echo tty || echo notty"})
	if err != nil {
		t.Fatal(err)
	}
	if ex := wait(t, p); ex.Code != 0 || string(p.Snapshot().Stdout) != "notty\n" || p.HasTTY() {
		t.Fatalf("without tty: exit %+v stdout %q", ex, p.Snapshot().Stdout)
	}
	if err := p.Resize(sandbox.TTYSize{Rows: 1, Cols: 1}); control.KindOf(err) != control.KindInvalid {
		t.Errorf("Resize without a terminal: %v, want KindInvalid", err)
	}

	var out buffer
	p, err = sb.Start(ctx, control.ProcessSpec{ID: "yes", OpenStdin: true, Stdout: &out,
		TTY: &sandbox.TTYSize{Rows: 20, Cols: 70},
		Script: `tty -s && echo tty; stty size; echo to-stderr >&2; trap 'echo "winch $(stty size)"; W=1' WINCH
stty -echo; echo ready; while [ -z "$W" ]; do sleep 0.05; done; read line; echo "got $line"; exit 7`})
	if err != nil {
		t.Fatal(err)
	}
	if !sandboxPoll(func() bool { return strings.Contains(out.String(), "ready") }) {
		t.Fatalf("never ready: %q", out.String())
	}
	if err := p.Resize(sandbox.TTYSize{Rows: 40, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	if !sandboxPoll(func() bool { return strings.Contains(out.String(), "winch") }) {
		t.Fatalf("no SIGWINCH seen: %q", out.String())
	}
	if err := p.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	ex := wait(t, p)
	snap := p.Snapshot()
	if want := "tty\n20 70\nto-stderr\nready\nwinch 40 100\ngot hello\n"; ex.Code != 7 || crlf(string(snap.Stdout)) != want || len(snap.Stderr) != 0 {
		t.Errorf("exit %d stdout %q stderr %q; want 7 and %q", ex.Code, crlf(string(snap.Stdout)), snap.Stderr, want)
	}
	if err := p.Resize(sandbox.TTYSize{Rows: 1, Cols: 1}); control.KindOf(err) != control.KindNotFound {
		t.Errorf("Resize after the exit: %v, want KindNotFound", err)
	}
}

func TestProcessTTYTimeout(t *testing.T) {
	h := newHost(t)
	sb := open(t, h, control.SandboxSpec{})
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "t", Script: "echo started; sleep 600",
		TTY: &sandbox.TTYSize{Rows: 24, Cols: 80}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if ex := wait(t, p); ex.Code != 124 || !ex.TimedOut {
		t.Errorf("exit %+v, want 124 timed out", ex)
	}
}

// noTTY is a backend that can run commands but not on a terminal.
type noTTY struct{ sandbox.Backend }

func (noTTY) Name() string { return "plain" }

// A backend that cannot give a terminal or an argv[0] is refused before
// anything starts, naming it; one that can is not.
func TestProcessTTYRefused(t *testing.T) {
	reg := sandbox.NewRegistry()
	var ran bool
	if err := reg.Register(sandbox.BackendEntry{Name: "plain", Strength: 0,
		New: func(sandbox.Settings) (sandbox.Backend, error) { return noTTY{runFunc(func() { ran = true })}, nil }}); err != nil {
		t.Fatal(err)
	}
	h := control.New(control.Options{Backends: reg, Logf: t.Logf})
	sb, err := h.Open(context.Background(), control.SandboxSpec{ID: "p", Backend: "plain", Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, spec := range []control.ProcessSpec{
		{ID: "a", Argv: []string{"true"}, TTY: &sandbox.TTYSize{Rows: 24, Cols: 80}},
		{ID: "b", Argv: []string{"true"}, Arg0: "-sh"},
	} {
		_, err := sb.Start(context.Background(), spec)
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Kind != control.KindInvalid || !strings.Contains(err.Error(), `"plain"`) || hint.Of(err) == "" {
			t.Errorf("Start %+v: %v, want KindInvalid naming backend \"plain\" with a hint", spec, err)
		}
	}
	if ran {
		t.Error("the command ran")
	}
	if _, err := sb.Start(context.Background(), control.ProcessSpec{ID: "c", Argv: []string{"true"}, TTY: &sandbox.TTYSize{}}); control.KindOf(err) != control.KindInvalid {
		t.Errorf("a 0x0 terminal: %v, want KindInvalid", err)
	}
}

type runFunc func()

func (f runFunc) Name() string { return "plain" }
func (f runFunc) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	f()
	return &sandbox.Result{}, nil
}

func sandboxPoll(cond func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
