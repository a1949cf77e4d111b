package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gatebridge/gatebridge/internal/hint"
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
// them, under the spec's workspace, is declared mounted read-only in the
// sandbox's container (ReadOnlyPaths, absolute: a workspace below the
// declared one has protected paths of its own). Nothing the sandbox reports can prove a mount
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
	// ReadOnlyPaths are the paths the sandbox's container mounts
	// read-only, absolute, as the sandbox (and so gatebridge, the paths
	// being the same) sees them (declared by whoever wrote the pod); a
	// path under one of them is covered too.
	ReadOnlyPaths []string
}

// Uncovered returns the protected paths of workspace (relative to it, as
// in [sandbox.Spec.ProtectedPaths]), cleaned, that are neither a
// read-only path (absolute) nor under one. A protected path that is not
// relative and inside the workspace, or a read-only path that is not
// absolute, covers nothing.
func Uncovered(workspace string, protected, readOnly []string) []string {
	var out []string
	for _, p := range protected {
		if !covered(workspace, p, readOnly) {
			out = append(out, path.Clean(p))
		}
	}
	return out
}

func covered(workspace, p string, readOnly []string) bool {
	rel := path.Clean(p)
	if p == "" || !path.IsAbs(workspace) || path.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	at := path.Join(workspace, rel)
	for _, r := range readOnly {
		if !path.IsAbs(r) {
			continue
		}
		r = path.Clean(r)
		if at == r || strings.HasPrefix(at, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// ProtectedWorkspaces returns the workspaces all of whose protected
// paths the read-only paths cover: those a writable attached sandbox may
// open. (They are found from the read-only paths that end with a
// protected path or with a parent of one.)
func ProtectedWorkspaces(protected, readOnly []string) []string {
	var out []string
	for _, r := range readOnly {
		if !path.IsAbs(r) {
			continue
		}
		r = path.Clean(r)
		for _, p := range protected {
			parts := strings.Split(path.Clean(p), "/")
			for k := 1; k <= len(parts); k++ {
				ws, ok := strings.CutSuffix(r, "/"+strings.Join(parts[:k], "/"))
				if !ok {
					continue
				}
				if ws == "" {
					ws = "/"
				}
				if !slices.Contains(out, ws) && len(Uncovered(ws, protected, readOnly)) == 0 {
					out = append(out, ws)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// ProtectedHint says which workspaces the read-only paths protect, and
// how to protect another.
func ProtectedHint(protected, readOnly []string) string {
	h := "mount it read-only in the sandbox's container (a readOnly subPath volumeMount) and add its absolute path to sandbox.attach.read_only_paths; or mount the workspace read-only and pass --attach-readonly-workspace"
	if ws := ProtectedWorkspaces(protected, readOnly); len(ws) > 0 {
		h = "open a workspace whose protected paths are declared (" + strings.Join(ws, ", ") + "), or " + h
	}
	return h
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
		return nil, &sandbox.Error{Backend: Name, Op: op, Err: err, Help: hint}
	}
	if len(spec.Command) == 0 {
		return fail("run", errors.New("empty command"), "")
	}
	if err := sandbox.CheckSpecSupport(a, spec); err != nil {
		return nil, err
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
		if un := Uncovered(spec.Workspace, spec.ProtectedPaths, a.ReadOnlyPaths); len(un) > 0 {
			return fail("protected paths", fmt.Errorf("workspace %s: protected path %s is not declared read-only in the sandbox's container: gatebridge cannot make it read-only there, and the sandbox could write it", spec.Workspace, strings.Join(un, ", ")),
				ProtectedHint(spec.ProtectedPaths, a.ReadOnlyPaths))
		}
		// A link on the way (left in a persistent workspace by an earlier
		// sandbox): the pod's read-only mount shows its target, and host
		// tools follow it to what the sandbox may write elsewhere.
		if _, err := sandbox.ProtectedPaths(Name, spec); err != nil {
			return nil, err
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
	env := sandbox.MergeEnv(sandbox.SessionEnv(spec, spec.Session, a.Conn.Path()), spec.Env)
	return a.Conn.Run(ctx, Command{Argv: spec.Command, Env: env, Dir: wd}, spec)
}

var (
	_ sandbox.TTYRunner  = (*Attached)(nil)
	_ sandbox.Arg0Runner = (*Attached)(nil)
)

// TTYSupport: the Go agent opens a terminal inside; the sh agent cannot.
func (a *Attached) TTYSupport() error { return named(a.Conn.TTYSupport()) }

// Arg0Support: the Go agent sets argv[0]; the sh agent cannot.
func (a *Attached) Arg0Support() error { return named(a.Conn.Arg0Support()) }

// named gives the connection's refusal this backend's name.
func named(err error) error {
	var se *sandbox.Error
	if errors.As(err, &se) {
		c := *se
		c.Backend = Name
		return &c
	}
	return err
}

// ProtectedError is a protected path (sandbox.protected_paths) that the
// read-only paths the pod declares (sandbox.attach.read_only_paths) do
// not cover: a writable attached sandbox could plant what host tools run.
type ProtectedError struct{ hint.Hinted }

// CheckDeclared is the check of `serve --attach` with a writable
// workspace, before anything is served: the workspaces whose protected
// paths readOnly covers (ProtectedWorkspaces), or a *ProtectedError when
// there is none.
func CheckDeclared(protected, readOnly []string) ([]string, error) {
	ws := ProtectedWorkspaces(protected, readOnly)
	if len(ws) > 0 {
		return ws, nil
	}
	var eg []string
	for _, p := range protected {
		eg = append(eg, path.Join("/workspace", p))
	}
	return nil, &ProtectedError{hint.Hinted{
		Err: fmt.Errorf("with a writable workspace: protected path %s (sandbox.protected_paths) is not declared read-only in the sandbox's container for any workspace (sandbox.attach.read_only_paths %q): gatebridge cannot make it read-only there, and the sandbox could plant what host tools run",
			strings.Join(protected, ", "), readOnly),
		Help: fmt.Sprintf("mount each read-only in the sandbox's container (a readOnly subPath volumeMount of the workspace, as deploy/k8s/pod.yaml does), then declare where, as absolute paths: for a workspace /workspace, sandbox.attach.read_only_paths: [%s] (or GATEBRIDGE_SANDBOX_ATTACH_READ_ONLY_PATHS=%s); or mount the workspace read-only and pass --attach-readonly-workspace",
			strings.Join(eg, ", "), strings.Join(eg, ","))}}
}

// CheckWritable refuses a writable sandbox on the workspace the sandbox
// sees at inside, at its open, before anything runs (Run checks each
// command again): a protected path readOnly does not cover (a
// *ProtectedError), or a link on the way to one.
func CheckWritable(inside string, protected, readOnly []string) error {
	if un := Uncovered(inside, protected, readOnly); len(un) > 0 {
		return &ProtectedError{hint.Hinted{
			Err:  fmt.Errorf("%q %s: protected path %s (sandbox.protected_paths) is not declared read-only in the sandbox's container (sandbox.attach.read_only_paths): the sandbox could write it", "workspace", inside, strings.Join(un, ", ")),
			Help: ProtectedHint(protected, readOnly)}}
	}
	_, err := sandbox.ProtectedPaths(Name, &sandbox.Spec{Workspace: inside, WorkspaceWritable: true, ProtectedPaths: protected})
	return err
}
