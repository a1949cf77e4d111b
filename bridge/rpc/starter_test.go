package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/gatebridge/gatebridge/bridge/rpc"

	"github.com/gatebridge/gatebridge/sandbox"
)

// starter is a backend that keeps one long-lived sandbox per sandbox/open
// ([sandbox.Starter], as docker does), whose commands run in local runs;
// it records what the server asked of it.
type starter struct {
	mu      sync.Mutex
	image   string // Settings.Image given to New
	started []sandbox.StartSpec
	stopped int
	inner   sandbox.Backend
}

var _ sandbox.Starter = (*starter)(nil)

func (s *starter) Name() string { return "starter" }
func (s *starter) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	return nil, errors.New("starter: a command runs only in a started sandbox")
}

func (s *starter) StartSandbox(_ context.Context, sp sandbox.StartSpec) (sandbox.Persistent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, sp)
	return &started{s: s, spec: sp}, nil
}

// started is one sandbox a starter started: its sessions must live under
// its sessions root.
type started struct {
	s    *starter
	spec sandbox.StartSpec
}

var _ sandbox.Persistent = (*started)(nil)

func (p *started) Name() string         { return "starter" }
func (p *started) SessionsRoot() string { return p.spec.SessionsRoot }
func (p *started) Workspace() string    { return p.spec.Workspace }
func (p *started) Stop(context.Context) error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.stopped++
	return nil
}

func (p *started) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	if filepath.Dir(spec.Session.Root) != p.spec.SessionsRoot {
		return nil, fmt.Errorf("session %s is not under the sessions root %s", spec.Session.Root, p.spec.SessionsRoot)
	}
	return p.s.inner.Run(ctx, spec)
}

// A backend that can start a long-lived sandbox gets one per sandbox/open,
// found as a sandbox.Starter (not as a concrete backend): the sessions of
// its processes are made under the root it was started with, and
// sandbox/close stops it. "image" reaches the constructor of a backend
// that runs images, and is refused for any other.
func TestStarterBackend(t *testing.T) {
	opts := testOptions(t)
	local, err := opts.Backends.Lookup("local")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := local.New(sandbox.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	st := &starter{inner: inner}
	if err := opts.Backends.Register(sandbox.BackendEntry{Name: "starter", Strength: 0, Images: true,
		New: func(s sandbox.Settings) (sandbox.Backend, error) {
			st.mu.Lock()
			st.image = s.Image
			st.mu.Unlock()
			return st, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, opts)
	ws := traversableTempDir(t)
	var res SandboxOpenResult
	c.Call(MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb", Backend: "starter", Image: "example/img:1", Workspace: ws, WritableWorkspace: true}, &res)
	if o := c.Run("sb", "p1", nil, "sh", "-c", "echo hi"); string(o.Stdout) != "hi\n" || o.Exited.ExitCode != 0 {
		t.Fatalf("stdout %q stderr %q exit %+v", o.Stdout, o.Stderr, o.Exited)
	}
	st.mu.Lock()
	if st.image != "example/img:1" {
		t.Errorf("New got image %q", st.image)
	}
	if len(st.started) != 1 {
		t.Fatalf("started %d sandboxes, want 1", len(st.started))
	}
	sp := st.started[0]
	if !strings.HasPrefix(sp.Name, "rpc-") || !strings.HasSuffix(sp.Name, "-sb") || sp.SessionsRoot == "" || !sp.Owned || !sp.WorkspaceWritable {
		t.Errorf("StartSpec %+v", sp)
	}
	if real, _ := filepath.EvalSymlinks(ws); sp.Workspace != real {
		t.Errorf("workspace %q, want %q", sp.Workspace, real)
	}
	st.mu.Unlock()
	c.Call(MethodSandboxClose, SandboxCloseParams{SandboxID: "sb"}, nil)
	st.mu.Lock()
	if st.stopped != 1 {
		t.Errorf("stopped %d times after sandbox/close, want 1", st.stopped)
	}
	st.mu.Unlock()

	e := c.CallErr(MethodSandboxOpen, SandboxOpenParams{SandboxID: "sb2", Backend: "local", Image: "example/img:1", Workspace: ws})
	if e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, `"image" applies to the starter backend only`) {
		t.Errorf("image for local: %+v", e)
	}
}
