package rpc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// idPattern is what sandboxId and processId must match: they appear in
// logs and container names.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func checkID(field, id string) error {
	if err := required(field, id); err != nil {
		return err
	}
	if !idPattern.MatchString(id) {
		return errorf(CodeInvalidParams, "invalid params: %q %q: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit", field, id)
	}
	return nil
}

// sbox is one open sandbox of a connection.
type sbox struct {
	id        string
	backend   sandbox.Backend
	entry     sandbox.BackendEntry
	reason    string
	workspace string // host, symlinks resolved
	inside    string // where commands see it
	writable  bool
	env       []string
	reg       *gates.Registry
	kinds     map[string]string
	// dir is where process sessions are created ("": the bridge default);
	// for docker the leased sessions root mounted into the container.
	dir     string
	closers []func()
	uid     int
	gid     int

	// ready is closed when sandbox/open is done; openErr says whether it
	// failed.
	ready   chan struct{}
	openErr *Error

	mu        sync.Mutex
	closed    bool
	spare     *spareSession // opened ahead of the next process
	refilling bool
	refills   sync.WaitGroup
	procs     map[string]*proc
	allowed   map[string]bool // gates approved for the sandbox's life
}

func (c *conn) sandboxOpen(params json.RawMessage) (any, error) {
	var p SandboxOpenParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := checkID("sandboxId", p.SandboxID); err != nil {
		return nil, err
	}
	if p.Backend == "" {
		p.Backend = "auto"
	}
	if err := required("workspace", p.Workspace); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p.Workspace) {
		return nil, errorf(CodeInvalidParams, "invalid params: \"workspace\" %q must be an absolute host path", p.Workspace)
	}
	ws, err := filepath.EvalSymlinks(p.Workspace)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(ws); err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return nil, errorf(CodeInvalidParams, "invalid params: \"workspace\" %s: %v", p.Workspace, err)
	}
	if check := c.srv.opts.CheckWorkspace; check != nil {
		if err := check(ws, p.WritableWorkspace); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, e
			}
			return nil, errorf(CodeInvalidParams, "invalid params: \"workspace\" %s: %v", p.Workspace, err)
		}
	}
	env, err := envList("env", p.Env)
	if err != nil {
		return nil, err
	}

	// Reserve the id and a slot before the slow part.
	c.mu.Lock()
	if _, dup := c.sandboxes[p.SandboxID]; dup {
		c.mu.Unlock()
		return nil, errorf(CodeConflict, "sandbox %q is already open on this connection", p.SandboxID)
	}
	if len(c.sandboxes) >= c.srv.opts.MaxSandboxes {
		c.mu.Unlock()
		return nil, errorf(CodeLimit, "%d sandboxes are open (limit maxSandboxes); close one first", len(c.sandboxes))
	}
	sb := &sbox{id: p.SandboxID, workspace: ws, writable: p.WritableWorkspace, env: env,
		procs: map[string]*proc{}, allowed: map[string]bool{}, ready: make(chan struct{})}
	c.sandboxes[p.SandboxID] = sb
	c.mu.Unlock()
	return later(func() (any, error) {
		err := c.setUpSandbox(sb, &p)
		if err == nil && c.ctx.Err() != nil {
			err = context.Cause(c.ctx)
		}
		if err != nil {
			c.mu.Lock()
			if c.sandboxes[p.SandboxID] == sb {
				delete(c.sandboxes, p.SandboxID)
			}
			c.mu.Unlock()
			sb.release()
			sb.openErr = toError(err)
			close(sb.ready)
			return nil, err
		}
		close(sb.ready)
		c.refill(sb)
		return &SandboxOpenResult{SandboxID: sb.id, Backend: sb.entry.Name, Reason: sb.reason, WorkspaceInside: sb.inside}, nil
	}), nil
}

// setUpSandbox chooses and prepares the backend, and builds the gates.
func (c *conn) setUpSandbox(sb *sbox, p *SandboxOpenParams) error {
	o := c.srv.opts
	ctx := c.ctx
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
			return errorf(CodeInvalidParams, "invalid params: %q applies to %s (backend %q)", f.field, which, p.Backend)
		}
	}
	settings.Image, settings.Runtime = cmp.Or(p.Image, settings.Image), cmp.Or(p.Runtime, settings.Runtime)
	if p.Backend == "auto" {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, e, why, err := o.Backends.Auto(cctx, settings, o.AllowUnsandboxed)
		cancel()
		if err != nil && ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("no sandbox backend is usable (%s)", why),
				Data: map[string]string{"hint": "install bubblewrap, or start Docker with the image present; or pass backend \"local\" (no isolation)"}}
		}
		if settings.Runtime != "" && !e.Runtimes {
			sandbox.Close(b) // an OCI runtime was asked for: never quietly a weaker sandbox
			return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("OCI runtime %s is configured, but the docker backend cannot run (%s)", settings.Runtime, why),
				Data: map[string]string{"hint": "fix docker (gatebridge doctor), or open with backend \"bwrap\""}}
		}
		sb.backend, sb.entry, sb.reason = b, e, "auto: "+why
	} else {
		e, err := o.Backends.Lookup(p.Backend)
		if err != nil {
			return errorf(CodeInvalidParams, "invalid params: \"backend\": %v (or \"auto\")", err)
		}
		b, err := e.New(settings)
		if err != nil {
			return err
		}
		sb.backend, sb.entry, sb.reason = b, e, "chosen by the client"
		if err := e.Usable(ctx, b); err != nil {
			sandbox.Close(b)
			sb.backend = nil
			return err
		}
	}
	sb.closers = append(sb.closers, func() { sandbox.Close(sb.backend) })
	if sb.entry.Prepare != nil {
		if err := sb.entry.Prepare(ctx, sb.backend); err != nil {
			return err
		}
	}
	sb.uid, sb.gid = os.Geteuid(), os.Getegid()
	if o.RunAs != nil {
		sb.uid, sb.gid = o.RunAs(sb.workspace)
	}
	// A backend that can (docker): one sandbox for the sandbox's life,
	// owned by this process (pruned if it dies), its sessions under a
	// leased root that the next gatebridge prunes too.
	if st, ok := sb.backend.(sandbox.Starter); ok {
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
		sb.closers = append(sb.closers, func() {
			if err := release(); err != nil {
				// Its lease goes anyway: prune removes a lockless
				// root (a minute old) and says what stays.
				o.Logf("gatebridge: serve: remove the sessions root of sandbox %s: %v", sb.id, err)
			}
		})
		name := fmt.Sprintf("rpc-%d-%s-%s", os.Getpid(), strings.ToLower(filepath.Base(root))[3:11], sb.id)
		if len(name) > 63 { // the engine's limit for sandbox names
			name = name[:63]
		}
		ds, err := st.StartSandbox(ctx, sandbox.StartSpec{Name: name, SessionsRoot: root, Workspace: sb.workspace,
			WorkspaceWritable: sb.writable, UID: sb.uid, GID: sb.gid, AllowRoot: o.Process.AllowRoot,
			ProtectedPaths: o.Process.ProtectedPaths, Owned: true})
		if err != nil {
			return err
		}
		sb.closers = append(sb.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := ds.Stop(sctx); err != nil {
				o.Logf("gatebridge: serve: remove sandbox %s: %v", sb.id, err)
			}
		})
		sb.backend, sb.dir = ds, root
	}
	sb.inside = sb.workspace
	if m, ok := sb.backend.(sandbox.WorkspaceMapper); ok {
		in, _ := m.WorkspaceInside(sb.workspace)
		sb.inside = in
	}
	reg, kinds, err := c.baseGates(sb.workspace, sb.inside, sb.writable)
	if err != nil {
		return err
	}
	sb.closers = append(sb.closers, func() { reg.Close() })
	// Under c.mu: gate/register reads sb.reg there, so a gate registered
	// meanwhile is added either by it or here, never by neither.
	c.mu.Lock()
	defer c.mu.Unlock()
	sb.reg, sb.kinds = reg, kinds
	for _, g := range c.rtGates {
		if err := reg.Register(g); err != nil {
			return errorf(CodeConflict, "registered gate %s: %v", g.spec.Name, err)
		}
	}
	return nil
}

// baseGates are the built-in and configured gates for a workspace.
func (c *conn) baseGates(workspace, inside string, writable bool) (*gates.Registry, map[string]string, error) {
	if c.srv.opts.Gates == nil {
		return gates.NewRegistry(), map[string]string{}, nil
	}
	reg, kinds, err := c.srv.opts.Gates(workspace, inside, writable)
	if err != nil {
		return nil, nil, fmt.Errorf("gates: %w", err)
	}
	return reg, kinds, nil
}

func (c *conn) sandboxClose(params json.RawMessage) (any, error) {
	var p SandboxCloseParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := required("sandboxId", p.SandboxID); err != nil {
		return nil, err
	}
	c.mu.Lock()
	sb := c.sandboxes[p.SandboxID]
	delete(c.sandboxes, p.SandboxID)
	c.mu.Unlock()
	if sb == nil {
		return nil, errorf(CodeNotFound, "no open sandbox %q", p.SandboxID)
	}
	return later(func() (any, error) {
		<-sb.ready
		sb.close(c)
		return struct{}{}, nil
	}), nil
}

// close stops the sandbox's processes (their output and exit are still
// reported), then releases the backend.
func (sb *sbox) close(c *conn) {
	if sb.openErr != nil {
		return // released when it failed
	}
	sb.mu.Lock()
	sb.closed = true
	procs := make([]*proc, 0, len(sb.procs))
	for _, p := range sb.procs {
		procs = append(procs, p)
	}
	sb.mu.Unlock()
	for _, p := range procs {
		p.stop(errSandboxClosed)
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

var errSandboxClosed = errors.New("its sandbox was closed")

// release runs the closers, last first.
func (sb *sbox) release() {
	for i := len(sb.closers) - 1; i >= 0; i-- {
		sb.closers[i]()
	}
	sb.closers = nil
}

// envList turns a JSON env object into KEY=VALUE entries, sorted.
func envList(field string, env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, errorf(CodeInvalidParams, "invalid params: %q: bad entry %q (a name without '=' or NUL, a value without NUL)", field, k)
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// spareSession is a session opened ahead of the process that will use it,
// so that process/start does not wait for the session directory and its
// wrappers. owner is the process once it takes it (for approvals).
type spareSession struct {
	sess  *bridge.Session
	owner atomic.Pointer[proc]
}

// openSession opens a session for a process of sb.
func (c *conn) openSession(sb *sbox) (*spareSession, error) {
	o := c.srv.opts
	ss := &spareSession{}
	bcfg := o.Bridge
	bcfg.Gates = sb.reg
	bcfg.Approve = c.approver(sb, func() *proc { return ss.owner.Load() })
	if sb.dir != "" {
		bcfg.Dir = sb.dir
	}
	if r, ok := sb.backend.(sandbox.EventsReporter); ok && (bcfg.Watch == "" || bcfg.Watch == bridge.WatchAuto) && !r.HostEvents(c.ctx) {
		bcfg.Watch = bridge.WatchPoll // the OCI runtime hides the container's writes from inotify
	}
	sess, err := bridge.Open(bcfg)
	if err != nil {
		return nil, err
	}
	if sb.uid != os.Geteuid() && sb.entry.Strength > 0 {
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
func (c *conn) takeSession(sb *sbox) (*spareSession, error) {
	sb.mu.Lock()
	ss := sb.spare
	sb.spare = nil
	sb.mu.Unlock()
	if ss == nil {
		var err error
		if ss, err = c.openSession(sb); err != nil {
			return nil, err
		}
	}
	c.refill(sb)
	return ss, nil
}

// refill opens a spare session for sb in the background, unless one is
// there or on its way, or sb is closing.
func (c *conn) refill(sb *sbox) {
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
		housekeep(func() { ss, err = c.openSession(sb) })
		sb.mu.Lock()
		defer sb.mu.Unlock()
		sb.refilling = false
		if err != nil {
			return // process/start opens its own and reports the error
		}
		if sb.closed {
			ss.sess.Close()
			return
		}
		sb.spare = ss
	}()
}
