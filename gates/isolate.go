package gates

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/internal/hint"
)

// An Isolator runs a gate's host program in a sandbox of its own, with no
// more authority than an [IsolateSpec] gives it. A kind whose gates run a
// program (command gates, stdio MCP servers) builds the [exec.Cmd] as it
// would for the host and hands it to Isolate before starting it. A
// program wires one into [Env.Isolator]; package gates has none (it does
// not import package sandbox).
//
// Isolate rewrites cmd, which must not have been started, so that
// starting it starts cmd's program (Path, Args, Env, Dir) inside the
// isolated sandbox. Stdin, Stdout and Stderr keep working, and so does the
// caller's way of stopping the program (killing the process or its process
// group, exec.CommandContext's Cancel): once the process the caller
// started is gone, so is every process the program started. The program
// never runs as root, sees the system directories a program needs
// read-only, its own program file and Dir read-only (Dir read-write when
// it lies in a Write path; with no Dir it starts in its private /tmp), a
// private /tmp, and nothing else of the host but what the spec lists. Its
// environment is cmd.Env, nothing more.
//
// # Threads
//
// Isolate locks the calling goroutine to its OS thread and never unlocks
// it: the caller starts cmd from that same goroutine, keeps the goroutine
// until cmd has been waited for, and then lets it end, which discards the
// thread. Isolate may change the thread's credentials (a session keyring
// of its own, so that the program cannot use the invoker's keys), and the
// program may be tied to the thread's life (bwrap's --die-with-parent
// follows the thread that started it). [runIsolated] does this for
// command gates.
//
// ctx bounds Isolate's own work (a probe, a cgroup), not the program's
// life. An error means cmd must not run at all: neither isolated nor on
// the host (fail closed). When err is nil, cleanup releases what Isolate
// made and stops whatever of the program is left; call it once, after
// cmd has been waited for or if it never started. An Isolator is safe for
// concurrent use.
type Isolator interface {
	Isolate(ctx context.Context, cmd *exec.Cmd, s IsolateSpec) (cleanup func(), err error)
}

// An IsolationChecker is an [Isolator] that can tell, before any program
// runs, whether it can isolate one here. [Env.Isolation] calls Check
// whenever it hands out the isolator, and refuses the gate when it fails
// (fail closed); the error's hint ([hint.Of]) says what to fix.
type IsolationChecker interface {
	Check(ctx context.Context) error
}

// IsolateSpec is what an isolated program may reach beyond what every one
// gets (see [Isolator]): a gate's `isolate` settings. An Isolator may
// refuse a path that leads through a link ([Env.Isolation] resolves them
// once: one that turns into a link later was swapped, by whoever writes
// where it lies).
type IsolateSpec struct {
	Read    []string // host paths it may read
	Write   []string // host paths it may read and write
	Network bool     // the host's network; without it, none
	// Host runs the program on the host, with gatebridge's own authority,
	// as before gates were isolated: no Isolator is used. The other
	// fields must then be unset. An Isolator never sees it set.
	Host bool
}

// String says how a program under s runs, for listings (doctor).
func (s IsolateSpec) String() string {
	if s.Host {
		return "on the host, with gatebridge's user and authority (isolate.host)"
	}
	net := "no network"
	if s.Network {
		net = "the host's network"
	}
	list := func(p []string) string {
		if len(p) == 0 {
			return "nothing"
		}
		return strings.Join(p, ", ")
	}
	return fmt.Sprintf("in its own sandbox: reads %s, writes %s, %s", list(s.Read), list(s.Write), net)
}

// Isolation returns the Isolator a gate whose program runs under s uses,
// nil when s.Host. Paths the gate binds besides s (its working directory
// and HOME) are checked too: extra, under the setting that names each
// ("dir", "home").
//
// It fails with a [*SettingError] naming the setting ("isolate",
// "isolate.read", "isolate.write", "isolate.host", or an extra's) when:
// the program would run isolated and env has no Isolator, or its
// [IsolationChecker] says it cannot run here (fail closed: the hint says
// how to fix that or how to run the gate on the host); s.Host comes with
// other settings; a path is not absolute or does not exist; a path holds
// or lies in one of env.Sessions (a gate would read every sandbox's
// calls); a path holds the file of a secret of env.Secrets (a gate gets
// a secret through its env, and only the ones it references: an MCP
// server given /home/me could read every secret file kept there); a
// Write path holds or lies in one of env.Protected under the workspace (a
// gate could plant .git/hooks the host runs).
func (env Env) Isolation(ctx context.Context, s IsolateSpec, extra ...ExtraPath) (Isolator, error) {
	iso, _, _, err := env.IsolationResolved(ctx, s, extra...)
	return iso, err
}

// IsolationResolved is [Env.Isolation] that also returns s with its
// paths resolved (symlinks followed, as checked), and extra's the same:
// what to give the Isolator at each run, so that a path some component
// of which becomes a link later (the sandbox writes the workspace) is
// refused rather than followed to wherever the link points.
func (env Env) IsolationResolved(ctx context.Context, s IsolateSpec, extra ...ExtraPath) (Isolator, IsolateSpec, []string, error) {
	iso, err := env.isolation(ctx, s, extra...)
	if err != nil || iso == nil {
		return iso, s, nil, err
	}
	resolve := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	out := IsolateSpec{Network: s.Network}
	for _, p := range s.Read {
		out.Read = append(out.Read, resolve(p))
	}
	for _, p := range s.Write {
		out.Write = append(out.Write, resolve(p))
	}
	var ex []string
	for _, x := range extra {
		if x.Path == "" {
			ex = append(ex, "")
			continue
		}
		ex = append(ex, resolve(x.Path))
	}
	return iso, out, ex, nil
}

func (env Env) isolation(ctx context.Context, s IsolateSpec, extra ...ExtraPath) (Isolator, error) {
	if s.Host {
		if s.Network || len(s.Read) > 0 || len(s.Write) > 0 {
			return nil, &SettingError{Field: "isolate.host", Err: errors.New("host: true runs the program on the host: network, read and write would not apply"),
				Help: func(key string) string {
					return "drop " + key + ".isolate.host to keep the program in its own sandbox, or drop the other isolate settings"
				}}
		}
		return nil, nil
	}
	check := func(field string, paths []string, write bool) error {
		for _, p := range paths {
			if help, err := env.checkIsolatePath(p, write); err != nil {
				return &SettingError{Field: field, Err: err, Help: func(string) string { return help }}
			}
		}
		return nil
	}
	if err := check("isolate.read", s.Read, false); err != nil {
		return nil, err
	}
	if err := check("isolate.write", s.Write, true); err != nil {
		return nil, err
	}
	for _, x := range extra {
		if x.Path == "" {
			continue
		}
		write := false
		for _, w := range s.Write {
			if fspath.Within(filepath.Clean(x.Path), filepath.Clean(w)) {
				write = true
			}
		}
		if err := check(x.Field, []string{x.Path}, write); err != nil {
			return nil, err
		}
	}
	if env.Isolator == nil {
		return nil, &SettingError{Field: "isolate", Err: errors.New("no sandbox for gate programs here"),
			Help: func(key string) string { return hostHelp(key, "") }}
	}
	if c, ok := env.Isolator.(IsolationChecker); ok {
		if err := c.Check(ctx); err != nil {
			return nil, &SettingError{Field: "isolate", Err: fmt.Errorf("cannot run its program in a sandbox of its own: %w", err),
				Help: func(key string) string { return hostHelp(key, hint.Of(err)) }}
		}
	}
	return env.Isolator, nil
}

// ExtraPath is a path a gate binds into its sandbox besides its isolate
// settings, and the setting that names it ([Env.Isolation]).
type ExtraPath struct{ Field, Path string }

func hostHelp(key, why string) string {
	h := "to run it on the host as before, with gatebridge's authority, set " + key + ".isolate: {host: true}"
	if why != "" {
		return why + "; or, " + h
	}
	return "install bubblewrap (gates run in a bwrap sandbox of their own), or, " + h
}

// checkIsolatePath checks one path an isolated gate is given, and says
// how to fix it.
func (env Env) checkIsolatePath(p string, write bool) (help string, err error) {
	if !filepath.IsAbs(p) {
		return "give the absolute host path", fmt.Errorf("%s is not an absolute path", quoteArg(p))
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "list host paths that exist", fmt.Errorf("%s: %w", quoteArg(p), errors.Unwrap(err))
	}
	for _, s := range env.Sessions {
		if s == "" {
			continue
		}
		rs, err := filepath.EvalSymlinks(s)
		if err != nil {
			rs = filepath.Clean(s)
		}
		if fspath.Within(rs, real) || fspath.Within(real, rs) {
			return "list narrower paths, outside bridge.session_dir and sandbox.docker.sessions_root",
				fmt.Errorf("%s and the session directory %s overlap: a gate would see every sandbox's calls", quoteArg(p), rs)
		}
	}
	for _, name := range env.Secrets.Names() {
		src, _ := env.Secrets.Source(name)
		if src.File == "" {
			continue
		}
		f := filepath.Clean(src.File)
		if d, err := filepath.EvalSymlinks(filepath.Dir(f)); err == nil {
			f = filepath.Join(d, filepath.Base(f))
		}
		if fspath.Within(f, real) {
			return "list narrower paths, or keep secret files where no gate reads (a gate gets a secret through its env only)",
				fmt.Errorf("%s holds %s, the file of secret %s: the gate would read it, and every other secret kept there", quoteArg(p), f, name)
		}
	}
	if !write || env.Workspace == "" {
		return "", nil
	}
	ws, err := filepath.EvalSymlinks(env.Workspace)
	if err != nil {
		ws = filepath.Clean(env.Workspace)
	}
	for _, rel := range env.Protected {
		pp := filepath.Join(ws, filepath.Clean(rel))
		if fspath.Within(pp, ws) && (fspath.Within(pp, real) || fspath.Within(real, pp)) {
			return "list the directories the gate writes below the workspace, none holding a protected path (sandbox.protected_paths)",
				fmt.Errorf("%s would make the workspace's protected path %s writable: the gate could plant what the host runs (.git/hooks)", quoteArg(p), pp)
		}
	}
	return "", nil
}

// runIsolated starts cmd through iso with s, on a goroutine of its own
// locked to an OS thread that ends with it (see [Isolator]), runs started
// on the caller's goroutine once cmd has started, and returns cmd.Wait's
// error, after cleanup. startErr is set, and nothing ran, when Isolate or
// Start failed.
func runIsolated(ctx context.Context, iso Isolator, s IsolateSpec, cmd *exec.Cmd, started func()) (waitErr, startErr error) {
	startc := make(chan error, 1)
	waitc := make(chan error, 1)
	go func() {
		// Never unlocked: Isolate may have changed this thread, and the
		// program is tied to it; the thread ends with the goroutine.
		runtime.LockOSThread()
		cleanup, err := iso.Isolate(ctx, cmd, s)
		if err != nil {
			startc <- err
			return
		}
		if err := cmd.Start(); err != nil {
			cleanup()
			startc <- err
			return
		}
		startc <- nil
		err = cmd.Wait()
		cleanup()
		waitc <- err
	}()
	if err := <-startc; err != nil {
		return nil, err
	}
	started()
	return <-waitc, nil
}

// isolatedHome is HOME for an isolated program with no home of its own:
// its private /tmp, new for each run.
const isolatedHome = "/tmp"
