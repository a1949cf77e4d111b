package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

// The one-shot path (gatebridge run, sandbox exec): one command, in a
// session of its own, on a backend chosen for it ([Choose]); no [Host].

// RunSpec is one command to run once ([Run]).
type RunSpec struct {
	// Chosen is the backend ([Choose]); Run does not close it.
	Chosen *Chosen
	// Bridge is the session's config (Gates, Audit, Redact, Logf, Keep,
	// Watch, Limits); Dir is the sandbox's sessions root when Chosen
	// needs one, and Approve is Decider's.
	Bridge bridge.Config
	// Decider decides the gates that need approval (nil: none asks).
	Decider *approval.Decider
	// Process is the command, its workspace, streams and identity.
	Process sandbox.Spec
	// Kept, when set, hears where the session directory is kept
	// (Bridge.Keep).
	Kept func(dir string)
}

// Run opens a session for spec.Process on spec.Chosen, runs the command
// and closes the session (a failure to close is logged through
// Bridge.Logf). A session that cannot be set up is a *SessionError.
func Run(ctx context.Context, spec RunSpec) (*bridge.Result, error) {
	c, bcfg := spec.Chosen, spec.Bridge
	var sessID string // set once the session is open, before any call
	if spec.Decider != nil {
		bcfg.Approve = spec.Decider.ApproveFunc(bcfg.Gates, spec.Process.Workspace, func() string { return sessID })
	}
	if root := c.SessionsRoot(); root != "" {
		bcfg.Dir = root
	}
	if r, ok := c.Backend.(sandbox.EventsReporter); ok && bcfg.Watch == bridge.WatchAuto && !r.HostEvents(ctx) {
		bcfg.Watch = bridge.WatchPoll // the OCI runtime hides the container's writes from inotify
	}
	sess, err := bridge.Open(bcfg)
	if err != nil {
		return nil, &SessionError{hint.Hinted{Err: err, Help: "check bridge.session_dir (or $XDG_RUNTIME_DIR, /dev/shm): it must be a directory you own that others cannot write"}}
	}
	sessID = sess.ID()
	if bcfg.Keep && spec.Kept != nil {
		spec.Kept(sess.Dirs().Root)
	}
	// The command runs as spec.UID in an isolating backend: let that uid
	// (alone) into the session. An unsandboxed backend (local) runs it as
	// gatebridge itself, so letting another uid in would only widen who
	// can read the session.
	if p := spec.Process; p.UID != os.Geteuid() && c.Entry.Strength > 0 {
		if err := sess.Allow(p.UID, p.GID); err != nil {
			sess.Close()
			return nil, &SessionError{hint.Hinted{Err: err, Help: "put bridge.session_dir on a local filesystem (tmpfs, ext4) where gatebridge, as root, can set ACLs or change owners"}}
		}
	}
	res, runErr := sess.Run(ctx, c.Backend, spec.Process)
	closeErr := sess.Close()
	if runErr != nil {
		return nil, runErr
	}
	if closeErr != nil && !bcfg.Keep && bcfg.Logf != nil {
		bcfg.Logf("gatebridge: %v", closeErr)
	}
	return res, nil
}

// SessionError is a session that could not be set up (bridge.Open, its
// ACLs), with how to fix it.
type SessionError struct{ hint.Hinted }

// InsideWorkspace is where the chosen sandbox sees the host workspace
// ("" when it does not).
func (c *Chosen) InsideWorkspace(host string) string {
	if m, ok := c.Backend.(sandbox.WorkspaceMapper); ok {
		in, _ := m.WorkspaceInside(host)
		return in
	}
	return host
}

// SessionsRoot is the directory the sessions of a reopened sandbox must
// live in ("": anywhere).
func (c *Chosen) SessionsRoot() string {
	if c.Persistent == nil {
		return ""
	}
	return c.Persistent.SessionsRoot()
}

// ReusedWorkspace is the host workspace a reopened sandbox was started
// with, symlinks resolved ("" when none). It comes from what the reopen
// read: no second request to the engine.
func (c *Chosen) ReusedWorkspace() string {
	if c.Persistent == nil || c.Persistent.Workspace() == "" {
		return ""
	}
	ws := c.Persistent.Workspace()
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		return r
	}
	return filepath.Clean(ws)
}

// RunErrorKind names, in run --json's words (error.kind, docs/json.md),
// a failure of the control plane's one-shot path: policy_denied,
// image_refused, image_pull, image_missing, sandbox_unavailable,
// session, else internal. (A front end's own config and usage errors
// are its to name.)
func RunErrorKind(err error) string {
	var se *sandbox.Error
	var sess *SessionError
	if _, ok := cmdpolicy.IsDenied(err); ok {
		return "policy_denied"
	}
	if k := DataKind(err); k != "" {
		return k
	}
	switch {
	case errors.Is(err, sandbox.ErrUnavailable), errors.As(err, &se):
		return "sandbox_unavailable"
	case errors.As(err, &sess):
		return "session"
	}
	return "internal"
}
