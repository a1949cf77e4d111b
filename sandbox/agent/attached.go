package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Name is the backend name of [Attached].
const Name = "attached"

// Layout of an attached directory (`gatebridge serve --attach DIR`, and
// `gatebridge agent --dir DIR/agent` in the sandbox).
const (
	AttachedAgentDir    = "agent"
	AttachedSessionsDir = "sessions"
)

// Attached is a backend for a sandbox that gatebridge does not start: a
// container that shares a directory with it (a pod's volume) and runs
// `gatebridge agent`. The shared directory and the workspace must be
// mounted at the same paths on both sides; sessions live under the shared
// directory. Isolation is what the sandbox's own runtime gives (the pod's
// security context): this backend cannot make the workspace read-only or
// protect paths in it, so it refuses a spec that asks for what it cannot
// enforce.
//
// Protected paths ([sandbox.Spec.ProtectedPaths]) are the same: in a
// writable workspace this backend runs a command only when every one of
// them is declared mounted read-only in the sandbox's container
// (ReadOnlyPaths). Nothing the sandbox reports can prove a mount
// read-only, so the declaration is the operator's, and keeping it true is
// the pod's (deploy/k8s mounts each one read-only with a subPath).
type Attached struct {
	// Conn is the connection to the agent.
	Conn *Conn
	// Root is the shared directory, as both sides see it.
	Root string
	// WorkspaceReadOnly says the sandbox mounts the workspace read-only
	// (declared by whoever wrote the pod): then only read-only specs are
	// accepted; without it only writable ones are.
	WorkspaceReadOnly bool
	// ReadOnlyPaths are the workspace-relative paths the sandbox's
	// container mounts read-only (declared by whoever wrote the pod); a
	// path under one of them is covered too.
	ReadOnlyPaths []string
}

// Uncovered returns the protected paths (workspace-relative) that are
// neither a read-only path nor under one, cleaned; a path that is not
// relative and inside the workspace is never covered.
func Uncovered(protected, readOnly []string) []string {
	var out []string
	for _, p := range protected {
		rel := filepath.Clean(p)
		covered := false
		if p != "" && !filepath.IsAbs(rel) && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
			for _, r := range readOnly {
				r = filepath.Clean(r)
				if r == "" || filepath.IsAbs(r) || r == "." || r == ".." || strings.HasPrefix(r, "../") {
					continue
				}
				if rel == r || strings.HasPrefix(rel, r+"/") {
					covered = true
					break
				}
			}
		}
		if !covered {
			out = append(out, rel)
		}
	}
	return out
}

var (
	_ sandbox.Backend         = (*Attached)(nil)
	_ sandbox.WorkspaceMapper = (*Attached)(nil)
)

// Name returns "attached".
func (a *Attached) Name() string { return Name }

// WorkspaceInside: the workspace is at the same path on both sides.
func (a *Attached) WorkspaceInside(host string) (string, bool) { return host, true }

// Run runs spec through the agent.
func (a *Attached) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	fail := func(op string, err error, hint string) (*sandbox.Result, error) {
		return nil, &sandbox.Error{Backend: Name, Op: op, Err: err, Hint: hint}
	}
	if len(spec.Command) == 0 {
		return fail("run", errors.New("empty command"), "")
	}
	root := strings.TrimSuffix(filepath.Clean(a.Root), "/") + "/"
	for _, p := range []string{spec.Session.Root, spec.Session.Bin, spec.Session.Calls, spec.Session.Responses, spec.Session.Tmp} {
		if p != "" && !strings.HasPrefix(filepath.Clean(p), root) {
			return fail("map session", fmt.Errorf("%s is not under the shared directory %s", p, root),
				"create sessions under the directory given to --attach")
		}
	}
	if spec.WorkspaceWritable && a.WorkspaceReadOnly {
		return fail("map workspace", errors.New("the sandbox mounts the workspace read-only"),
			"open the sandbox with a read-only workspace, or mount it writable in the sandbox and drop --attach-readonly-workspace")
	}
	if !spec.WorkspaceWritable && !a.WorkspaceReadOnly {
		return fail("map workspace", errors.New("a read-only workspace was asked for, and an attached sandbox's mounts are its own: gatebridge cannot make it read-only"),
			"mount the workspace read-only in the sandbox and pass --attach-readonly-workspace, or open the sandbox with a writable workspace")
	}
	if spec.WorkspaceWritable && spec.Workspace != "" {
		if un := Uncovered(spec.ProtectedPaths, a.ReadOnlyPaths); len(un) > 0 {
			return fail("protected paths", fmt.Errorf("protected path %s is not declared read-only in the sandbox's container: gatebridge cannot make it read-only there, and the sandbox could write it", strings.Join(un, ", ")),
				"mount it read-only in the sandbox's container (a readOnly subPath volumeMount) and declare it in sandbox.attach.read_only_paths; or mount the workspace read-only and pass --attach-readonly-workspace")
		}
	}
	uid, gid := a.Conn.User()
	if uid == 0 && !spec.AllowRoot {
		return fail("run", errors.New("the agent runs as root (uid 0): every command would"),
			"run the sandbox container as a non-root user (securityContext runAsUser), or allow root explicitly")
	}
	if uid != os.Geteuid() {
		if os.Geteuid() != 0 {
			return fail("prepare session", fmt.Errorf("the agent runs as uid %d and gatebridge as uid %d, not root: it cannot hand the session over", uid, os.Geteuid()),
				"run gatebridge as root (with CAP_CHOWN and CAP_FOWNER), or the agent as gatebridge's uid")
		}
		if err := sandbox.GrantSession(spec.Session, uid, gid); err != nil {
			return fail("prepare session", err, "")
		}
	}
	wd := "/"
	if spec.Workspace != "" {
		wd = spec.Workspace
	}
	wd, err := spec.WorkDir(wd)
	if err != nil {
		return fail("run", err, "")
	}
	env := sandbox.MergeEnv(sandbox.SessionEnv(spec.Session, a.Conn.Path()), spec.Env)
	return a.Conn.Run(ctx, Command{Argv: spec.Command, Env: env, Dir: wd}, spec)
}
