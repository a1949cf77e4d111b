package sandbox

import (
	"context"
	"errors"
	"os"
)

// Local runs commands as plain host processes: no isolation at all. The
// session directories are used in place, so inside paths are host paths.
// Use it only when nothing better is available (the CLI warns).
//
// The command gets the host environment, then [Spec.Env], then
// [SessionEnv] (whose PATH puts the session bin/ before Spec.Env's PATH, or
// else the host PATH). It runs in its own process group; on timeout,
// cancellation or when the main process exits, the whole group gets
// SIGTERM, then SIGKILL after [Spec.KillGrace]. A process that leaves the
// group (setsid) escapes: Run stops reading its output after a short delay
// but cannot stop it. If gatebridge dies without cleaning up (kill -9),
// the command gets SIGKILL from the kernel (parent-death signal) and the
// rest of its group from the reaper, one sh per gatebridge process that
// outlives it for that (see reaper_linux.go).
type Local struct{}

var (
	_ Backend = (*Local)(nil)
	_ Checker = (*Local)(nil)
)

// NewLocal returns the local backend.
func NewLocal() *Local { return &Local{} }

// Name returns "local".
func (*Local) Name() string { return LocalName }

// Check always succeeds: a host process can always run.
func (*Local) Check(context.Context) error { return nil }

// Run runs spec.Command on the host (see the package contract).
func (l *Local) Run(ctx context.Context, spec *Spec) (*Result, error) {
	if len(spec.Command) == 0 {
		return nil, &Error{Backend: "local", Op: "run", Err: errors.New("empty command")}
	}
	basePath, ok := EnvValue(spec.Env, "PATH")
	if !ok {
		basePath = os.Getenv("PATH")
	}
	env := MergeEnv(os.Environ(), spec.Env, SessionEnv(spec, spec.Session, basePath))
	pathList, _ := EnvValue(env, "PATH")
	path, ok := lookPath(spec.Command[0], pathList)
	if !ok {
		return notFound(spec, spec.Command[0]), nil
	}
	dir, err := spec.WorkDir(spec.Workspace)
	if err != nil {
		return nil, &Error{Backend: "local", Op: "run", Err: err}
	}
	p := &process{
		backend: "local",
		path:    path,
		args:    spec.Command,
		env:     env,
		dir:     dir,
		tree:    newGroupTree,
	}
	p.reap = true
	return runProcess(ctx, spec, p)
}
