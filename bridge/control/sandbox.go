package control

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// SandboxSpec is what Open opens.
type SandboxSpec struct {
	// ID names the sandbox in logs, gate calls and the long-lived
	// sandbox's name.
	ID string
	// Backend is "auto" ("" means auto) or a registered backend's name.
	Backend string
	// Workspace is the host directory commands work in (absolute).
	Workspace string
	Writable  bool
	// Env is added to every process's environment (KEY=VALUE).
	Env []string
	// Image and Runtime override Settings' for a backend that takes them.
	Image, Runtime string
	// Gates are the runtime gates offered besides the built-in and
	// configured ones (nil: none).
	Gates *GateSet
	// Approver is asked about gates that need approval and commands the
	// command policy marks ask, when no grant settles them (nil: they are
	// refused).
	Approver Approver

	checked bool // Check passed; Workspace is resolved
}

// Sandbox is one open sandbox: a backend (or one long-lived sandbox of
// it), its gates, and the processes running in it.
type Sandbox struct {
	h         *Host
	id        string
	chosen    *Chosen
	backend   sandbox.Backend
	workspace string // host, symlinks resolved
	inside    string // where commands see it
	writable  bool
	env       []string
	reg       *gates.Registry
	kinds     map[string]string
	set       *GateSet
	approver  Approver
	// session names the sandbox to the approval decider (its session
	// grants and pending questions): unique in the process, unlike id.
	session string
	// dir is where process sessions are created ("": the bridge default);
	// for a Starter the leased sessions root mounted into the sandbox.
	dir     string
	closers []func()
	uid     int
	gid     int
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc

	mu        sync.Mutex
	closed    bool
	spare     *spareSession // opened ahead of the next process
	refilling bool
	refills   sync.WaitGroup
	procs     map[*Process]bool
	commands  int // started, for Options.MaxCommands

	fsOnce sync.Once // FS
	fs     *FS
	fsErr  error
}

// newSessionKey is a sandbox's name for the approval decider.
func newSessionKey() string {
	var b [12]byte
	rand.Read(b[:])
	return "sb-" + hex.EncodeToString(b[:])
}

// ID is the sandbox's id.
func (sb *Sandbox) ID() string { return sb.id }

// Backend is the name of the backend the sandbox runs in.
func (sb *Sandbox) Backend() string { return sb.chosen.Entry.Name }

// Reason says why that backend was chosen.
func (sb *Sandbox) Reason() string { return sb.chosen.Reason }

// WorkspaceInside is where commands see the workspace.
func (sb *Sandbox) WorkspaceInside() string { return sb.inside }

// Gates are the sandbox's gates.
func (sb *Sandbox) Gates() *gates.Registry { return sb.reg }

// Check resolves spec's workspace (absolute, an existing directory, its
// links resolved) and asks Options.CheckWorkspace: the cheap checks of
// Open, for a front end that answers them before the slow part.
func (h *Host) Check(spec *SandboxSpec) error {
	if spec.checked {
		return nil
	}
	if !filepath.IsAbs(spec.Workspace) {
		return invalid("workspace", "%q %q must be an absolute host path", "workspace", spec.Workspace)
	}
	ws, err := filepath.EvalSymlinks(spec.Workspace)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(ws); err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return invalid("workspace", "%q %s: %v", "workspace", spec.Workspace, err)
	}
	if check := h.opts.CheckWorkspace; check != nil {
		if err := check(ws, spec.Writable); err != nil {
			e := invalid("workspace", "%q %s: %v", "workspace", spec.Workspace, err)
			e.Err = err
			return e
		}
	}
	spec.Workspace, spec.checked = ws, true
	return nil
}

// Open opens a sandbox: Check, the backend's choice (Choose), one
// long-lived sandbox when the backend is a sandbox.Starter (taken from
// the warm pool when it holds one for this spec, see PoolOptions), the
// workspace as the sandbox sees it, the gates. A spare session is opened
// in the background for the first process.
func (h *Host) Open(ctx context.Context, spec SandboxSpec) (*Sandbox, error) {
	if err := h.Check(&spec); err != nil {
		return nil, err
	}
	settings, err := h.settingsFor(&spec)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sb := &Sandbox{h: h, id: spec.ID, workspace: spec.Workspace, writable: spec.Writable, env: spec.Env,
		set: spec.Gates, approver: spec.Approver, session: newSessionKey(), ctx: sctx, cancel: cancel,
		procs: map[*Process]bool{}}
	sb.closers = append(sb.closers, cancel, func() { h.decider.EndSession(sb.session) })
	key := poolKey{backend: cmp.Or(spec.Backend, Auto), image: settings.Image, runtime: settings.Runtime,
		workspace: spec.Workspace, writable: spec.Writable}
	st := h.pool.take(key)
	if st == nil {
		if st, err = h.start(ctx, key, settings, spec.ID); err != nil {
			sb.release()
			return nil, err
		}
		if st.persistent != nil {
			h.pool.want(key, settings) // later opens of this spec find one started
		}
	}
	if err := sb.attach(st); err != nil {
		sb.release()
		return nil, err
	}
	if ctx.Err() != nil {
		sb.Close()
		return nil, context.Cause(ctx)
	}
	sb.refill()
	return sb, nil
}

// settingsFor are the backends' settings for p: the server's, with p's
// image and OCI runtime when the backend asked for takes them.
func (h *Host) settingsFor(p *SandboxSpec) (sandbox.Settings, error) {
	o := h.opts
	settings := o.Settings
	for _, f := range []struct {
		field, value string
		takes        func(sandbox.BackendEntry) bool
	}{
		{"image", p.Image, func(e sandbox.BackendEntry) bool { return e.Images }},
		{"runtime", p.Runtime, func(e sandbox.BackendEntry) bool { return e.Runtimes }},
	} {
		if f.value == "" {
			continue
		}
		var takers []string // the backends that take this field
		for _, e := range o.Backends.Entries() {
			if f.takes(e) {
				takers = append(takers, e.Name)
			}
		}
		if !slices.Contains(takers, p.Backend) {
			which := "the " + strings.Join(takers, " or ") + " backend only"
			if len(takers) == 0 {
				which = "no backend this server offers"
			}
			return settings, invalid(f.field, "%q applies to %s (backend %q)", f.field, which, p.Backend)
		}
	}
	settings.Image, settings.Runtime = cmp.Or(p.Image, settings.Image), cmp.Or(p.Runtime, settings.Runtime)
	return settings, nil
}

// started is the part of a sandbox that does not depend on its tenant:
// the chosen backend and, for a Starter, its long-lived sandbox with its
// agent up. The warm pool keeps these; Open attaches a tenant (id, gates,
// approver) to one.
type started struct {
	key        poolKey
	chosen     *Chosen
	backend    sandbox.Backend
	persistent sandbox.Persistent // nil: the backend is no Starter
	dir        string             // sessions root of a long-lived sandbox
	uid, gid   int
	closers    []func()
}

// release runs the closers, last first (the long-lived sandbox is
// stopped).
func (st *started) release() {
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i]()
	}
	st.closers = nil
}

// start chooses and prepares the backend for key, and starts its
// long-lived sandbox when it is a sandbox.Starter; tag ends the
// sandbox's name.
func (h *Host) start(ctx context.Context, key poolKey, settings sandbox.Settings, tag string) (*started, error) {
	o := h.opts
	chosen, err := Choose(ctx, o.Backends, Choice{Backend: key.backend, Settings: settings,
		AllowUnsandboxed: o.AllowUnsandboxed, Probe: true, HowLocal: o.HowLocal})
	if err != nil {
		return nil, err
	}
	st := &started{key: key, chosen: chosen, backend: chosen.Backend, uid: os.Geteuid(), gid: os.Getegid()}
	st.closers = append(st.closers, chosen.Close)
	if o.RunAs != nil {
		st.uid, st.gid = o.RunAs(key.workspace)
	}
	// A backend that can (docker): one sandbox for the sandbox's life,
	// owned by this process (pruned if it dies), its sessions under a
	// leased root that the next gatebridge prunes too.
	if s, ok := st.backend.(sandbox.Starter); ok {
		if err := h.startLongLived(ctx, st, s, tag); err != nil {
			st.release()
			return nil, err
		}
	}
	return st, nil
}

// attach makes st sb's: the workspace as it sees it, the gates, the
// tenant's gate set. sb releases st from now on.
func (sb *Sandbox) attach(st *started) error {
	sb.chosen, sb.backend, sb.dir, sb.uid, sb.gid = st.chosen, st.backend, st.dir, st.uid, st.gid
	sb.closers = append(sb.closers, st.release)
	sb.inside = sb.workspace
	if m, ok := sb.backend.(sandbox.WorkspaceMapper); ok {
		in, _ := m.WorkspaceInside(sb.workspace)
		sb.inside = in
	}
	reg, kinds, err := sb.h.baseGates(sb.workspace, sb.inside, sb.writable)
	if err != nil {
		return err
	}
	sb.closers = append(sb.closers, func() { reg.Close() })
	sb.reg, sb.kinds = reg, kinds
	if sb.set != nil {
		return sb.set.attach(sb)
	}
	return nil
}

// startLongLived starts the one sandbox of a Starter backend.
func (h *Host) startLongLived(ctx context.Context, st *started, s sandbox.Starter, tag string) error {
	o := h.opts
	parent := o.Bridge.Dir
	if parent == "" {
		parent = bridge.DefaultParent()
		if err := bridge.EnsurePrivateParent(parent); err != nil {
			return err
		}
	}
	root, release, err := bridge.LeaseRoot(parent)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, func() {
		if err := release(); err != nil {
			// Its lease goes anyway: prune removes a lockless
			// root (a minute old) and says what stays.
			o.Logf("gatebridge: serve: remove the sessions root of sandbox %s: %v", tag, err)
		}
	})
	name := fmt.Sprintf("%s-%d-%s-%s", o.NamePrefix, os.Getpid(), strings.ToLower(filepath.Base(root))[3:11], tag)
	if len(name) > 63 { // the engine's limit for sandbox names
		name = name[:63]
	}
	ds, err := s.StartSandbox(ctx, sandbox.StartSpec{Name: name, SessionsRoot: root, Workspace: st.key.workspace,
		WorkspaceWritable: st.key.writable, UID: st.uid, GID: st.gid, AllowRoot: o.Process.AllowRoot,
		ProtectedPaths: o.Process.ProtectedPaths, Owned: true})
	if err != nil {
		return err
	}
	st.closers = append(st.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := ds.Stop(sctx); err != nil {
			o.Logf("gatebridge: serve: remove sandbox %s: %v", tag, err)
		}
	})
	st.backend, st.persistent, st.dir = ds, ds, root
	return nil
}

// baseGates are the built-in and configured gates for a workspace.
func (h *Host) baseGates(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
	if h.opts.Gates == nil {
		return gates.NewRegistry(), map[string]string{}, nil
	}
	reg, kinds, err := h.opts.Gates(workspace, inside, writable)
	if err != nil {
		return nil, nil, fmt.Errorf("gates: %w", err)
	}
	return reg, kinds, nil
}

// ErrSandboxClosed is the cause of a process stopped by its sandbox's
// Close.
var ErrSandboxClosed = errors.New("its sandbox was closed")

// Close stops the sandbox's processes (their output and exit are still
// reported), then releases the backend.
func (sb *Sandbox) Close() {
	if sb.set != nil {
		sb.set.detach(sb)
	}
	sb.mu.Lock()
	sb.closed = true
	procs := make([]*Process, 0, len(sb.procs))
	for p := range sb.procs {
		procs = append(procs, p)
	}
	sb.mu.Unlock()
	for _, p := range procs {
		p.cancel(ErrSandboxClosed)
	}
	for _, p := range procs {
		<-p.released
	}
	sb.mu.Lock()
	ss := sb.spare
	sb.spare = nil
	sb.mu.Unlock()
	sb.refills.Wait()
	if ss != nil {
		ss.sess.Close()
	}
	sb.mu.Lock()
	if sb.spare != nil { // a refill that finished in between
		sb.spare.sess.Close()
		sb.spare = nil
	}
	sb.mu.Unlock()
	sb.release()
}

// release runs the closers, last first.
func (sb *Sandbox) release() {
	for i := len(sb.closers) - 1; i >= 0; i-- {
		sb.closers[i]()
	}
	sb.closers = nil
}

// WorkDir turns a process's cwd into a Spec.Dir: relative to the
// workspace, or absolute as commands see the workspace.
func (sb *Sandbox) WorkDir(cwd string) (string, error) {
	if cwd == "" {
		return "", nil
	}
	rel := cwd
	if filepath.IsAbs(cwd) {
		r, err := filepath.Rel(sb.inside, filepath.Clean(cwd))
		if err != nil || !filepath.IsLocal(r) && r != "." {
			return "", invalid("cwd", "%q %q is not inside the workspace (%s inside the sandbox)", "cwd", cwd, sb.inside)
		}
		rel = r
	}
	if rel != "." && !filepath.IsLocal(rel) {
		return "", invalid("cwd", "%q %q leaves the workspace", "cwd", cwd)
	}
	st, err := os.Stat(filepath.Join(sb.workspace, rel))
	if err != nil || !st.IsDir() {
		return "", invalid("cwd", "%q %q is not a directory of the workspace", "cwd", cwd)
	}
	return rel, nil
}

// spareSession is a session opened ahead of the process that will use it,
// so that a start does not wait for the session directory and its
// wrappers. owner is the process once it takes it (for approvals).
type spareSession struct {
	sess  *bridge.Session
	owner atomic.Pointer[Process]
}

// openSession opens a session for a process of sb.
func (sb *Sandbox) openSession() (*spareSession, error) {
	o := sb.h.opts
	ss := &spareSession{}
	bcfg := o.Bridge
	bcfg.Gates = sb.reg
	bcfg.Approve = sb.approve(func() *Process { return ss.owner.Load() })
	if sb.dir != "" {
		bcfg.Dir = sb.dir
	}
	if r, ok := sb.backend.(sandbox.EventsReporter); ok && (bcfg.Watch == "" || bcfg.Watch == bridge.WatchAuto) && !r.HostEvents(sb.ctx) {
		bcfg.Watch = bridge.WatchPoll // the OCI runtime hides the container's writes from inotify
	}
	sess, err := bridge.Open(bcfg)
	if err != nil {
		return nil, err
	}
	if sb.uid != os.Geteuid() && sb.chosen.Entry.Strength > 0 {
		if err := sess.Allow(sb.uid, sb.gid); err != nil {
			sess.Close()
			return nil, err
		}
	}
	ss.sess = sess
	return ss, nil
}

// takeSession returns the spare session of sb, or a new one, and starts
// opening the next spare.
func (sb *Sandbox) takeSession() (*spareSession, error) {
	sb.mu.Lock()
	ss := sb.spare
	sb.spare = nil
	sb.mu.Unlock()
	if ss == nil {
		var err error
		if ss, err = sb.openSession(); err != nil {
			return nil, err
		}
	}
	sb.refill()
	return ss, nil
}

// refill opens a spare session for sb in the background, unless one is
// there or on its way, or sb is closing.
func (sb *Sandbox) refill() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed || sb.refilling || sb.spare != nil {
		return
	}
	sb.refilling = true
	sb.refills.Add(1)
	go func() {
		defer sb.refills.Done()
		var ss *spareSession
		var err error
		housekeep(func() { ss, err = sb.openSession() })
		sb.mu.Lock()
		defer sb.mu.Unlock()
		sb.refilling = false
		if err != nil {
			return // Start opens its own and reports the error
		}
		if sb.closed {
			ss.sess.Close()
			return
		}
		sb.spare = ss
	}()
}
