// Package local is the backend that isolates nothing: a command runs as a
// plain host process, as gatebridge's user. Use it only when nothing
// better is available (the CLI warns); a program offers it with
// [Register].
package local

import (
	"context"
	"errors"
	"os"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
)

// Backend runs commands as plain host processes: no isolation at all. The
// session directories are used in place, so inside paths are host paths.
//
// The command gets the host environment, then [sandbox.Spec.Env], then
// [sandbox.SessionEnv] (whose PATH puts the session bin/ before Spec.Env's
// PATH, or else the host PATH). It runs in its own process group; on
// timeout, cancellation or when the main process exits, the whole group
// gets SIGTERM, then SIGKILL after [sandbox.Spec.KillGrace]. A process
// that leaves the group (setsid) escapes: Run stops reading its output
// after a short delay but cannot stop it. If gatebridge dies without
// cleaning up (kill -9), the command gets SIGKILL from the kernel
// (parent-death signal) and the rest of its group from the reaper, one sh
// per gatebridge process that outlives it for that (package
// sandbox/internal/proc).
type Backend struct{}

var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Checker    = (*Backend)(nil)
	_ sandbox.TTYRunner  = (*Backend)(nil)
	_ sandbox.Arg0Runner = (*Backend)(nil)
)

// TTYSupport: a host process can always run on a pseudo-terminal the
// host opens ([sandbox.Spec.TTY]).
func (*Backend) TTYSupport() error { return nil }

// Arg0Support: a host process can always get its own argv[0].
func (*Backend) Arg0Support() error { return nil }

// New returns the local backend.
func New() *Backend { return &Backend{} }

// Name returns "local".
func (*Backend) Name() string { return Name }

// Check always succeeds: a host process can always run.
func (*Backend) Check(context.Context) error { return nil }

// Run runs spec.Command on the host (see the sandbox package contract).
func (l *Backend) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	if len(spec.Command) == 0 {
		return nil, &sandbox.Error{Backend: "local", Op: "run", Err: errors.New("empty command")}
	}
	args := spec.Command
	if spec.Arg0 != "" {
		args = append([]string{spec.Arg0}, spec.Command[1:]...)
	}
	basePath, ok := sandbox.EnvValue(spec.Env, "PATH")
	if !ok {
		basePath = os.Getenv("PATH")
	}
	env := sandbox.MergeEnv(os.Environ(), spec.Env, sandbox.SessionEnv(spec, spec.Session, basePath))
	pathList, _ := sandbox.EnvValue(env, "PATH")
	path, ok := proc.LookPath(spec.Command[0], pathList)
	if !ok {
		return proc.NotFound(spec, spec.Command[0]), nil
	}
	dir, err := spec.WorkDir(spec.Workspace)
	if err != nil {
		return nil, &sandbox.Error{Backend: "local", Op: "run", Err: err}
	}
	return proc.Run(ctx, spec, &proc.Process{
		Backend: "local",
		Path:    path,
		Args:    args,
		Env:     env,
		Dir:     dir,
		Tree:    proc.NewGroupTree,
		Reap:    true,
	})
}

var _ sandbox.FactsReporter = Backend{}

// Facts: the command runs on the host, with its network and its /tmp,
// and can write a workspace meant to be read-only.
func (Backend) Facts() sandbox.Facts {
	return sandbox.Facts{Network: "the host's network", TmpKept: true, TmpHost: true, Unconfined: true}
}
