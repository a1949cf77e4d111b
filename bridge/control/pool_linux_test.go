package control_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// fakeStarter keeps long-lived sandboxes as docker does (a
// sandbox.Starter), whose commands run with the local backend and see
// their sandbox's name in $SANDBOX_NAME; it records starts, warms and
// stops.
type fakeStarter struct {
	inner sandbox.Backend

	mu      sync.Mutex
	started []string          // names, in start order
	wss     map[string]string // workspace by name
	warmed  map[string]bool
	stopped map[string]bool
	fail    bool // StartSandbox fails
}

func (f *fakeStarter) Name() string { return "fake" }
func (f *fakeStarter) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	return nil, errors.New("fake: only in a started sandbox")
}

func (f *fakeStarter) StartSandbox(_ context.Context, sp sandbox.StartSpec) (sandbox.Persistent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("fake: start refused")
	}
	f.started = append(f.started, sp.Name)
	f.wss[sp.Name] = sp.Workspace
	return &fakeSandbox{f: f, spec: sp}, nil
}

// live are the started sandboxes not stopped.
func (f *fakeStarter) live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range f.started {
		if !f.stopped[n] {
			out = append(out, n)
		}
	}
	return out
}

type fakeSandbox struct {
	f    *fakeStarter
	spec sandbox.StartSpec
}

func (s *fakeSandbox) Name() string         { return "fake" }
func (s *fakeSandbox) SessionsRoot() string { return s.spec.SessionsRoot }
func (s *fakeSandbox) Workspace() string    { return s.spec.Workspace }
func (s *fakeSandbox) Warm(context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.warmed[s.spec.Name] = true
	return nil
}

func (s *fakeSandbox) Stop(context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.stopped[s.spec.Name] = true
	return nil
}

func (s *fakeSandbox) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	s.f.mu.Lock()
	stopped := s.f.stopped[s.spec.Name]
	s.f.mu.Unlock()
	if stopped {
		return nil, errors.New("fake: sandbox " + s.spec.Name + " was stopped")
	}
	spec.Env = append(spec.Env, "SANDBOX_NAME="+s.spec.Name)
	return s.f.inner.Run(ctx, spec)
}

var (
	_ sandbox.Starter = (*fakeStarter)(nil)
	_ sandbox.Warmer  = (*fakeSandbox)(nil)
)

// poolHost is a host with the fake starter as backend "fake" and a pool.
func poolHost(t *testing.T, po control.PoolOptions) (*control.Host, *fakeStarter) {
	t.Helper()
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	e, err := reg.Lookup("local")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := e.New(sandbox.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeStarter{inner: inner, wss: map[string]string{}, warmed: map[string]bool{}, stopped: map[string]bool{}}
	if err := reg.Register(sandbox.BackendEntry{Name: "fake", Strength: 1, Images: true,
		New: func(s sandbox.Settings) (sandbox.Backend, error) { return f, nil }}); err != nil {
		t.Fatal(err)
	}
	h := control.New(control.Options{Backends: reg, Settings: sandbox.Settings{Image: "default:1"}, Pool: po,
		Bridge: bridge.Config{Dir: t.TempDir()}, Process: sandbox.Spec{KillGrace: 500 * time.Millisecond}, Logf: t.Logf})
	t.Cleanup(h.Close)
	return h, f
}

// waitPool waits until the pool's stats satisfy ok (a test's bound, not
// a measurement).
func waitPool(t *testing.T, h *control.Host, what string, ok func(control.PoolStats) bool) control.PoolStats {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := h.PoolStats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool never got %s: %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nameIn is the name of the long-lived sandbox sb runs in, as its
// command sees it.
func nameIn(t *testing.T, sb *control.Sandbox) string {
	t.Helper()
	var out buffer
	p, err := sb.Start(context.Background(), control.ProcessSpec{ID: "name", Script: `echo "$SANDBOX_NAME"`, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if ex := wait(t, p); ex.Code != 0 {
		t.Fatalf("exit %+v", ex)
	}
	return strings.TrimSpace(out.String())
}

func openFake(t *testing.T, h *control.Host, id, ws string) *control.Sandbox {
	t.Helper()
	sb, err := h.Open(context.Background(), control.SandboxSpec{ID: id, Backend: "fake", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// The pool fills to Size once a spec was asked for; the next open takes
// a sandbox started (and warmed) before it, and a replacement refills
// the pool. A sandbox a tenant had is stopped at its close, never handed
// out again.
func TestPoolTakeRefillNoReuse(t *testing.T) {
	h, f := poolHost(t, control.PoolOptions{Size: 2})
	ws := t.TempDir()
	first := openFake(t, h, "first", ws)
	if n := nameIn(t, first); !strings.HasSuffix(n, "-first") {
		t.Fatalf("the first open ran in %q, want its own sandbox (nothing was pooled yet)", n)
	}
	waitPool(t, h, "2 ready", func(s control.PoolStats) bool { return s.Ready == 2 })
	pooled := slices.Clone(f.live()[1:])

	sb := openFake(t, h, "second", ws)
	got := nameIn(t, sb)
	if got != pooled[0] || !strings.HasSuffix(got, "-pool") {
		t.Fatalf("open ran in %q, want the oldest pooled sandbox %q (of %q)", got, pooled[0], pooled)
	}
	f.mu.Lock()
	warmed := f.warmed[got]
	f.mu.Unlock()
	if !warmed {
		t.Errorf("the pooled sandbox %s was handed out without being warmed", got)
	}
	st := waitPool(t, h, "a replacement", func(s control.PoolStats) bool { return s.Ready == 2 && s.Started == 3 })
	if st.Taken != 1 {
		t.Errorf("stats %+v, want 1 taken", st)
	}
	sb.Close()
	f.mu.Lock()
	stopped := f.stopped[got]
	f.mu.Unlock()
	if !stopped {
		t.Fatalf("sandbox %s not stopped at its tenant's close", got)
	}
	// Every later open gets another sandbox.
	seen := map[string]bool{got: true}
	for _, id := range []string{"a", "b", "c"} {
		sb := openFake(t, h, id, ws)
		n := nameIn(t, sb)
		if seen[n] {
			t.Fatalf("open %s ran in %s, which a tenant had before", id, n)
		}
		seen[n] = true
		sb.Close()
	}
	first.Close()
}

// A spec that differs (workspace, its mode, image) does not take a
// sandbox pooled for another.
func TestPoolSpecMismatch(t *testing.T) {
	h, f := poolHost(t, control.PoolOptions{Size: 1, MaxTotal: 1})
	ws, other := t.TempDir(), t.TempDir()
	openFake(t, h, "seed", ws).Close()
	waitPool(t, h, "1 ready", func(s control.PoolStats) bool { return s.Ready == 1 })
	pooled := f.live()[0]
	for _, spec := range []control.SandboxSpec{
		{ID: "otherws", Backend: "fake", Workspace: other},
		{ID: "writable", Backend: "fake", Workspace: ws, Writable: true},
		{ID: "image", Backend: "fake", Workspace: ws, Image: "other:2"},
		{ID: "auto", Workspace: ws},
	} {
		sb, err := h.Open(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if n := nameIn(t, sb); n == pooled || !strings.HasSuffix(n, "-"+spec.ID) {
			t.Errorf("%+v ran in %s, want its own sandbox", spec, n)
		}
		sb.Close()
	}
	if st := h.PoolStats(); st.Taken != 0 {
		t.Errorf("stats %+v: a mismatched spec took a pooled sandbox", st)
	}
}

// MaxTotal caps the pooled sandboxes of every spec together.
func TestPoolMaxTotal(t *testing.T) {
	h, f := poolHost(t, control.PoolOptions{Size: 3, MaxTotal: 4})
	for _, ws := range []string{t.TempDir(), t.TempDir(), t.TempDir()} {
		openFake(t, h, "seed", ws).Close()
	}
	waitPool(t, h, "4 ready", func(s control.PoolStats) bool { return s.Ready == 4 })
	// Let it try for more: a take and the refill it starts.
	sb := openFake(t, h, "take", f.spec(t, f.live()[0]))
	waitPool(t, h, "4 ready again", func(s control.PoolStats) bool { return s.Ready == 4 && s.Taken == 1 })
	sb.Close()
	if st := h.PoolStats(); st.Ready+st.Starting > 4 {
		t.Fatalf("stats %+v: more than MaxTotal 4 pooled", st)
	}
	if live := len(f.live()); live != 4 {
		t.Fatalf("%d sandboxes live, want the 4 pooled", live)
	}
}

// spec is the workspace a live sandbox was started with.
func (f *fakeStarter) spec(t *testing.T, name string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ws, ok := f.wss[name]
	if !ok {
		t.Fatalf("no record of %s", name)
	}
	return ws
}

// A pooled sandbox unused for Idle is stopped, and its spec is not
// refilled until asked for again.
func TestPoolIdleExpiry(t *testing.T) {
	h, f := poolHost(t, control.PoolOptions{Size: 2, Idle: 20 * time.Millisecond})
	ws := t.TempDir()
	openFake(t, h, "seed", ws).Close()
	st := waitPool(t, h, "expiries", func(s control.PoolStats) bool { return s.Expired >= 1 && s.Ready == 0 && s.Starting == 0 })
	// The stats count an expiry before its stop has finished: wait for
	// the stop (bounded), not for a time.
	for deadline := time.Now().Add(10 * time.Second); len(f.live()) != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if live := f.live(); len(live) != 0 {
		t.Fatalf("expired but still running after 10s: %q", live)
	}
	time.Sleep(50 * time.Millisecond) // a refill would have started by now
	if again := h.PoolStats(); again.Started != st.Started {
		t.Fatalf("the pool refilled an expired spec nobody asked for: %+v then %+v", st, again)
	}
	openFake(t, h, "again", ws).Close()
	waitPool(t, h, "a start after the spec was asked for again", func(s control.PoolStats) bool { return s.Started > st.Started })
}

// Close stops every pooled sandbox; a start failure is not retried in
// a loop.
func TestPoolCloseAndFailure(t *testing.T) {
	h, f := poolHost(t, control.PoolOptions{Size: 3})
	openFake(t, h, "seed", t.TempDir()).Close()
	waitPool(t, h, "3 ready", func(s control.PoolStats) bool { return s.Ready == 3 })
	h.Close()
	if live := f.live(); len(live) != 0 {
		t.Fatalf("Host.Close left pooled sandboxes running: %q", live)
	}
	if st := h.PoolStats(); st.Ready != 0 {
		t.Fatalf("stats after Close %+v", st)
	}

	h2, f2 := poolHost(t, control.PoolOptions{Size: 2})
	ws := t.TempDir()
	openFake(t, h2, "seed", ws).Close()
	waitPool(t, h2, "2 ready", func(s control.PoolStats) bool { return s.Ready == 2 })
	f2.mu.Lock()
	f2.fail = true
	f2.mu.Unlock()
	openFake(t, h2, "take", ws).Close() // its replacement fails to start
	st := waitPool(t, h2, "a failed start", func(s control.PoolStats) bool { return s.Failed >= 1 && s.Starting == 0 })
	time.Sleep(50 * time.Millisecond)
	if again := h2.PoolStats(); again.Failed != st.Failed {
		t.Fatalf("failed starts retried without an open: %+v then %+v", st, again)
	}
}

// A workspace directory removed and made again at the same path after
// the pool started its sandboxes is not the directory they mounted: an
// open of that path must not get one of them (it would see the old,
// deleted directory, and its protected paths as they were); they are
// stopped instead.
func TestPoolWorkspaceReplaced(t *testing.T) {
	h, f := poolHost(t, control.PoolOptions{Size: 2})
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	openFake(t, h, "seed", ws).Close()
	waitPool(t, h, "2 ready", func(s control.PoolStats) bool { return s.Ready == 2 })
	old := f.live()
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	sb := openFake(t, h, "tenant", ws)
	defer sb.Close()
	n := nameIn(t, sb)
	if slices.Contains(old, n) || !strings.HasSuffix(n, "-tenant") {
		t.Fatalf("open of the new directory ran in %s, pooled for the old one (%q)", n, old)
	}
	waitPool(t, h, "the stale ones stopped", func(s control.PoolStats) bool { return s.Stale == 2 })
	h.Close() // waits for the stale ones' stop
	for _, o := range old {
		f.mu.Lock()
		stopped := f.stopped[o]
		f.mu.Unlock()
		if !stopped {
			t.Errorf("stale pooled sandbox %s still running", o)
		}
	}
}
