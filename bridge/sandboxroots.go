package bridge

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// SandboxRootGrace is how old an unused sandbox sessions root must be to
// be pruned: `sandbox start` makes (or touches) it a moment before the
// container that uses it exists.
const SandboxRootGrace = time.Minute

// SandboxRoot is a default sessions root of a persistent sandbox
// (sandbox-NAME in the default session parent) and when it was last
// changed.
type SandboxRoot struct {
	Path    string
	Changed time.Time
}

// SandboxRoots lists the default sessions roots in parent: real
// directories only (nothing planted there is followed).
func SandboxRoots(parent string) []SandboxRoot {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var out []SandboxRoot
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "sandbox-") || !e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, SandboxRoot{filepath.Join(parent, e.Name()), fi.ModTime()})
	}
	return out
}

// PruneSandboxRoots removes the roots no sandbox uses (inUse: the sessions
// roots of the engine's persistent sandboxes) that are older than grace
// and hold no session any more (a live or kept one keeps its root). It
// returns the paths removed and those it could not remove.
func PruneSandboxRoots(roots []SandboxRoot, inUse []string, grace time.Duration) (removed []string, failed []*PruneError) {
	used := map[string]bool{}
	for _, u := range inUse {
		used[filepath.Clean(u)] = true
		if r, err := filepath.EvalSymlinks(u); err == nil {
			used[r] = true
		}
	}
	for _, r := range roots {
		if used[r.Path] || time.Since(r.Changed) < grace {
			continue
		}
		if real, err := filepath.EvalSymlinks(r.Path); err != nil || used[real] {
			continue
		}
		if hasSession(r.Path) {
			continue
		}
		if err := hostilefs.RemoveTree(r.Path); err != nil {
			failed = append(failed, &PruneError{Path: r.Path, Err: err})
			continue
		}
		removed = append(removed, r.Path)
	}
	return removed, failed
}

// hasSession reports whether dir still holds a session (or its lock or
// kept marker), or cannot be listed.
func hasSession(dir string) bool {
	fd, err := hostilefs.OpenDirNoFollow(dir)
	if err != nil {
		return true
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if strings.HasPrefix(n, mailbox.SessionPrefix) {
				return true
			}
		}
		if err == io.EOF {
			return false
		}
		if err != nil {
			return true
		}
	}
}

// SandboxSessionsRoot is where persistent sandbox name keeps its sessions
// when sandbox.docker.sessions_root is empty: its own directory,
// sandbox-<name> in [DefaultParent] (private to this user).
// Each sandbox mounts only its own root, so a command in one sandbox can
// neither see nor write another sandbox's sessions.
func SandboxSessionsRoot(name string) (string, error) {
	parent := DefaultParent()
	if err := EnsurePrivateParent(parent); err != nil {
		return "", err
	}
	return filepath.Join(parent, "sandbox-"+name), nil
}

// PrepareSessionsRoot creates root (and missing parents) so that the
// container user can traverse it: the root itself is 0711, owned by us. An
// existing root must be a directory we own (a shared temp dir could hold
// one planted by another user); its times are set to now, so that `prune`
// leaves it alone while the sandbox is being started. created says
// whether root was made here (also on error: then remove it). A root it
// refuses or cannot make is a *SessionsRootError.
func PrepareSessionsRoot(root string) (_ string, created bool, _ error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", false, err
	}
	fail := func(err error, help string) (string, bool, error) {
		return abs, created, &SessionsRootError{hint.Hinted{Err: err, Help: help}}
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fail(err, "pass a directory you can create with --sessions-root")
	}
	switch err := os.Mkdir(abs, 0o755); {
	case err == nil:
		created = true
	case !errors.Is(err, os.ErrExist):
		return fail(err, "pass a directory you can create with --sessions-root")
	}
	st, err := os.Lstat(abs)
	if err != nil {
		return fail(err, "pass a directory you can create with --sessions-root")
	}
	if !st.IsDir() {
		return fail(fmt.Errorf("%s is not a directory", abs), "remove it or pass another --sessions-root")
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fail(fmt.Errorf("%s is owned by uid %d, not by you", abs, sys.Uid),
			"pass a directory you own with --sessions-root")
	}
	// Sessions are created inside by bridge.Open (0700, then opened up for
	// the container user); the root only needs to be traversable.
	// 0711: the container user may traverse to the session it was given
	// (names are unguessable) but nobody else may list or create here.
	if st.Mode().Perm() != 0o711 {
		if err := os.Chmod(abs, 0o711); err != nil {
			return fail(err, "chmod 711 the sessions root")
		}
	}
	now := time.Now()
	if err := os.Chtimes(abs, now, now); err != nil {
		return fail(err, "pass a directory you own with --sessions-root")
	}
	return abs, created, nil
}

// A SessionsRootError is a sessions root PrepareSessionsRoot refuses or
// cannot make (Err), and how to fix it (Help).
type SessionsRootError struct{ hint.Hinted }

// A LeftoversReport is what [PruneLeftovers] removed, and what it could
// not.
type LeftoversReport struct {
	Sessions       []string // session dirs removed
	SessionsFailed []*PruneError
	// Roots counts the default sessions roots found; RootsErr is why
	// none was checked (the roots in use are not known: all are left).
	Roots        int
	RootsErr     error
	RootsRemoved []string
	RootsFailed  []*PruneError
}

// PruneLeftovers removes what gatebridge processes that died left in the
// session parents: session dirs whose process is gone (their lock is
// free) in the default parent, the extra parents and the default
// sessions roots of persistent sandboxes; then, when there are such
// roots, those no sandbox uses (inUse lists the roots the engine's
// sandboxes use; its error leaves them all), older than
// SandboxRootGrace and holding no session.
func PruneLeftovers(extra []string, inUse func() ([]string, error)) LeftoversReport {
	var rep LeftoversReport
	parents := append([]string{DefaultParent()}, extra...)
	// The default sessions roots, with their age before their sessions
	// are pruned (which touches them).
	roots := SandboxRoots(DefaultParent())
	for _, r := range roots {
		parents = append(parents, r.Path)
	}
	for _, p := range parents {
		removed, err := PruneSessions(p)
		rep.Sessions = append(rep.Sessions, removed...)
		for _, e := range unjoin(err) {
			pe, ok := e.(*PruneError)
			if !ok {
				pe = &PruneError{Path: p, Err: e}
			}
			rep.SessionsFailed = append(rep.SessionsFailed, pe)
		}
	}
	if rep.Roots = len(roots); rep.Roots == 0 {
		return rep
	}
	used, err := inUse()
	if err != nil {
		rep.RootsErr = err
		return rep
	}
	rep.RootsRemoved, rep.RootsFailed = PruneSandboxRoots(roots, used, SandboxRootGrace)
	return rep
}

// unjoin lists the errors err joins (err itself if it joins none).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
