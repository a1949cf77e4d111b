// Package sandbox is the contract between gatebridge and the backends
// that run a command with a gatebridge session mounted: [Backend], [Spec],
// [Result], [Error], the optional interfaces of what only some backends can
// do, the [Registry], and what every backend shares: the stop sequence
// ([Stopper]), output capture ([Capture]), the session's env, its grant
// to another uid, protected paths. It defines no backend. Each lives in
// its own package: sandbox/local (no isolation), sandbox/bwrap (bubblewrap
// namespaces), sandbox/docker (a container) and sandbox/agent (a
// long-lived sandbox reached through a directory).
//
// # Registry
//
// A [Registry] lists the backends a program offers, each as a
// [BackendEntry]: name, what it isolates, platforms, constructor from
// [Settings], availability check and doctor findings. [NewRegistry] is
// empty: the program registers each backend it offers from its main
// package (local.Register, bwrap.Register, docker.Register).
// [Registry.Auto] picks the strongest isolation that can run here.
//
// # Optional interfaces
//
// What only some backends can do is an interface of one method, found by
// a type assertion: [Checker], [WorkspaceMapper], [WakeForcer],
// [SessionsRooter], [Starter] (a long-lived sandbox, a [Persistent]),
// [Reopener], [TTYRunner] (a terminal, [Spec.TTY]) and [Arg0Runner]. Code above the backends asks for an ability, never for a
// concrete backend.
//
// # Contract
//
// A [Backend] receives a neutral [Spec]: the host directories of the session
// and how each must be mounted, the workspace, env, command and limits. It
// knows nothing about gates or the mailbox protocol. [Backend.Run] blocks
// until the command has exited and every process it started is gone, then
// returns its exit status and captured output.
//
// Cancelling ctx stops the command the same way a timeout does (SIGTERM to
// the whole process tree, SIGKILL after [Spec.KillGrace]; every backend
// runs this sequence through a [Stopper]) and Run still returns a [Result]
// with Canceled set; Run returns a non-nil error only when
// the command could not be started or supervised (the backend is unusable,
// the image is missing, …). Such errors are [*Error] values carrying a hint.
//
// # Exit codes
//
// [Result.ExitCode] is the command's status, 128+N when a signal N killed
// it, [ExitTimedOut] (124) when Spec.Timeout stopped it, [ExitCanceled] (130)
// when ctx did, and [ExitNotFound] (127) when Command[0] is not in the
// sandbox's PATH (the command is then not started).
//
// # Conformance
//
// Package sandbox/sandboxtest holds the suite every backend must pass.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"time"
)

// Backend runs commands in one kind of sandbox.
type Backend interface {
	// Name is the backend's name in a [Registry] ("local", "bwrap", …).
	Name() string
	// Run runs spec.Command to completion (see the package contract).
	Run(ctx context.Context, spec *Spec) (*Result, error)
}

// SessionDirs are the paths of one gatebridge session, as the host or the
// sandbox sees them. Which names they have is the mailbox format's
// business (package bridge/mailbox); a backend only mounts them.
type SessionDirs struct {
	Root      string // the session directory itself
	Bin       string // wrappers: read-only inside
	Calls     string // written by the sandbox
	Responses string // written by the host: read-only inside
	Tmp       string // scratch: writable inside
}

// Rebase returns the same layout with its root at root: each path below
// d.Root keeps its place relative to it (a path not below d.Root gets its
// base name under root). It is how a backend that mounts the session
// elsewhere (docker: /gatebridge/session) names the paths inside. Paths
// that are empty stay empty, and an empty layout (no session) stays empty.
func (d SessionDirs) Rebase(root string) SessionDirs {
	if d == (SessionDirs{}) {
		return d
	}
	move := func(p string) string {
		if p == "" {
			return ""
		}
		rel, err := filepath.Rel(d.Root, p)
		if d.Root == "" || err != nil || !filepath.IsLocal(rel) {
			rel = filepath.Base(p)
		}
		return filepath.Join(root, rel)
	}
	return SessionDirs{Root: root, Bin: move(d.Bin), Calls: move(d.Calls), Responses: move(d.Responses), Tmp: move(d.Tmp)}
}

// EventsReporter is implemented by backends whose sandboxes may write a
// session in a way the host's filesystem events do not report (an OCI
// runtime whose file sharing bypasses the host kernel). HostEvents false
// means the host must scan calls/ on a timer (bridge.WatchPoll).
type EventsReporter interface {
	HostEvents(ctx context.Context) bool
}

// Spec describes one command to run.
type Spec struct {
	// Command is argv; Command[0] is looked up in the sandbox's PATH.
	Command []string
	// Env is extra environment (KEY=VALUE) for the command. The backend adds
	// the session's entries ([SessionEnv]): PATH (session bin first),
	// TMPDIR, and what SessionEnv adds, pointing at the paths it mounted.
	Env []string
	// Session is the session to mount.
	Session SessionDirs
	// SessionEnv, when set, returns the environment entries that point the
	// command at the session as the backend mounted it (inside: the paths
	// inside; basePath: the PATH to put after inside.Bin). bridge's
	// Session.Run sets it to [PathEnv] plus the mailbox's
	// GATEBRIDGE_CALLS_DIR, GATEBRIDGE_RESPONSES_DIR and
	// GATEBRIDGE_SESSION_DIR. nil means [PathEnv] alone. Backends call it
	// through [SessionEnv].
	SessionEnv func(inside SessionDirs, basePath string) []string
	// Workspace is the host directory the command starts in.
	Workspace string
	// Dir is the working directory, relative to the workspace ("": the
	// workspace itself); see [Spec.WorkDir].
	Dir string
	// WorkspaceWritable allows writes to the workspace where the backend can
	// enforce read-only mounts.
	WorkspaceWritable bool
	// Stdin is the command's standard input; nil means /dev/null.
	Stdin io.Reader
	// Stdout and Stderr receive output live; nil discards it.
	Stdout io.Writer
	Stderr io.Writer
	// Timeout bounds the command's run time; 0 means none.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL; 0 means 2s.
	KillGrace time.Duration
	// MaxOutput caps the bytes captured per stream (head and tail are kept);
	// 0 means 1 MiB. Live streaming is not capped.
	MaxOutput int64
	// Labels are extra metadata a backend may attach (docker labels).
	Labels map[string]string
	// Limits bound what the command may make the host spend; isolating
	// backends enforce them (local cannot).
	Limits Limits
	// ProtectedPaths are workspace-relative paths (default: .git) that stay
	// read-only inside even when WorkspaceWritable is set, so the sandbox
	// cannot plant what host tools (git hooks, .git/config) run later.
	// The directories between the workspace and a nested one are mount
	// points inside, so that they cannot be renamed away with the
	// protected path in them ([ProtectedParents]).
	ProtectedPaths []string
	// UID and GID are the host identity the command runs as when
	// gatebridge itself is root (the CLI picks the workspace owner, else
	// 65534). An isolating backend never runs the command as host uid 0
	// unless AllowRoot is set.
	UID, GID  int
	AllowRoot bool
	// Signals, when set, delivers signals to the command while it runs:
	// each one received is sent to every process of the command (its
	// process group, every process of its sandbox), as a terminal's Ctrl-C
	// reaches a foreground job. Run reads it until the command has exited,
	// during the kill grace too.
	Signals <-chan syscall.Signal
	// TTY, when set, runs the command on a pseudo-terminal of that size
	// (only on a backend that is a [TTYRunner] and says it can): the
	// terminal is its stdin, stdout and stderr and its controlling
	// terminal, in a session of its own, so it never reaches gatebridge's
	// terminal. Its output arrives on Stdout alone (Stderr gets nothing),
	// capped as any output is; Stdin's bytes are typed at the terminal
	// and Stdin's end is the terminal's end-of-file character (Ctrl-D).
	TTY *TTYSize
	// Resize, with TTY, changes the terminal's size while the command
	// runs (the command gets SIGWINCH).
	Resize <-chan TTYSize
	// Arg0, when set, is the argv[0] the command sees; Command[0] stays
	// the program run (only on an [Arg0Runner] that says it can).
	Arg0 string
}

// TTYSize is a terminal's size in character cells.
type TTYSize struct {
	Rows, Cols uint16
}

// Limits bound a sandboxed command's resources. Zero means no limit.
type Limits struct {
	Memory  int64   // bytes of memory for the whole command (all processes)
	CPUs    float64 // CPU time as a number of CPUs
	Pids    int64   // processes and threads
	TmpSize int64   // bytes the command may write to its TMPDIR
}

// Result is the outcome of [Backend.Run].
type Result struct {
	// ExitCode is the command's exit status: 128+N when killed by signal
	// N, [ExitTimedOut] (124) on timeout, [ExitCanceled] (130) when ctx was
	// cancelled, whatever the signal that ended the command.
	ExitCode int
	TimedOut bool
	Canceled bool // ctx was cancelled (SIGINT/SIGTERM to gatebridge)
	Stdout   []byte
	Stderr   []byte
	// StdoutDropped and StderrDropped count bytes cut from the middle of
	// the captured streams; Truncated is true when either is non-zero.
	StdoutDropped int64
	StderrDropped int64
	Truncated     bool
	Duration      time.Duration
	// Info is backend-specific detail for the result (image, container id).
	Info map[string]string
}

// Error is a backend failure with a hint for the user.
type Error struct {
	Backend string
	Op      string // what was being done, e.g. "start bwrap"
	Err     error
	Help    string // how to fix it; may be empty ([Error.Hint])
}

func (e *Error) Error() string {
	return e.Backend + ": " + e.Op + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Hint says how to fix it ("" when Help is empty).
func (e *Error) Hint() string { return e.Help }

// ErrUnavailable is wrapped by errors saying a backend cannot run here.
var ErrUnavailable = errors.New("backend unavailable")

// ErrImageMissing is wrapped by errors saying the image to run is not
// present (and could not be pulled).
var ErrImageMissing = errors.New("image missing")

// ErrImagePull is wrapped by errors saying the image to run is not
// present and pulling it failed (registry unreachable, no such tag,
// denied, timed out).
var ErrImagePull = errors.New("image pull failed")

// ErrImageRefused is wrapped by errors saying the image to run is not
// allowed by the configured policy (docker: sandbox.docker.images).
var ErrImageRefused = errors.New("image not allowed")

// Exit codes [Result.ExitCode] takes when the backend, not the command,
// decided the outcome.
const (
	ExitTimedOut = 124 // Spec.Timeout elapsed (TimedOut is set)
	ExitNotFound = 127 // Command[0] is not in the sandbox's PATH
	ExitCanceled = 130 // ctx was cancelled (Canceled is set), as a shell reports SIGINT
)

// Defaults for Spec fields left zero.
const (
	DefaultKillGrace = 2 * time.Second
	DefaultMaxOutput = 1 << 20
)

// WorkDir is where the command starts, as seen at root (the workspace as
// the sandbox sees it): root joined with Dir. Dir must be a relative path
// that stays inside (no ".." out of it); the sandbox resolves it, so a
// symlink in the workspace leads only where the sandbox itself could go.
func (s *Spec) WorkDir(root string) (string, error) {
	if s.Dir == "" || s.Dir == "." {
		return root, nil
	}
	if filepath.IsAbs(s.Dir) || !filepath.IsLocal(s.Dir) {
		return "", fmt.Errorf("working directory %q must be relative to the workspace and stay inside it", s.Dir)
	}
	if root == "" {
		return "", fmt.Errorf("working directory %q needs a workspace", s.Dir)
	}
	return filepath.Join(root, s.Dir), nil
}
