// Package proc supervises the host processes the local and bwrap backends
// start for a [sandbox.Spec]: it starts one (on an OS thread locked for
// its parent-death signal), streams and captures its output, forwards
// [sandbox.Spec.Signals], runs the [sandbox.Stopper] at the timeout or
// cancellation, stops what the command left behind, and maps its exit
// status (see the sandbox package contract). A [Tree] tells it which
// processes make up the command: a process group (local) or a pid
// namespace (bwrap). Linux only; elsewhere [Run] fails with a hint.
package proc

import (
	"os"
	"syscall"
	"time"
)

// Tuning of the process supervisor; variables so tests can shorten them.
var (
	// drainDelay is how long Run keeps reading stdout and stderr after every
	// process it can kill is gone: a process that escaped (setsid, double
	// fork out of the group) may still hold the pipes open.
	drainDelay = 250 * time.Millisecond
	// reapLimit bounds the wait for killed processes to disappear after
	// SIGKILL (they normally vanish within milliseconds).
	reapLimit = 5 * time.Second
)

// Tree signals every process a started command consists of.
type Tree interface {
	// Terminate sends SIGTERM to every process of the command.
	Terminate()
	// Kill sends SIGKILL to every process of the command.
	Kill()
	// Signal sends sig to every process of the command (Spec.Signals).
	Signal(sig syscall.Signal)
	// Alive reports whether a process of the command other than the main
	// one (already reaped) still runs. Zombies do not count.
	Alive() bool
}

// Process is one OS process a backend starts for a Spec.
type Process struct {
	Backend string // the backend's name, in errors
	Path    string // executable, already resolved
	Args    []string
	Env     []string
	Dir     string
	Extra   []*os.File // ExtraFiles: fd 3, 4, …
	// Tree returns the Tree of the started main process.
	Tree func(main *os.Process) Tree
	// DeathSignal is sent to the process when gatebridge dies; 0 means
	// SIGKILL.
	DeathSignal syscall.Signal
	// Cred, when set, starts the process as that user (gatebridge is root).
	Cred *syscall.Credential
	// Prepare, when set, runs on the OS thread that starts the process,
	// just before it does; that thread is then discarded, not reused.
	Prepare func() error
	// Started, when set, runs on that thread as soon as the process has
	// started (or failed to): the thread leaves the cgroup Prepare joined,
	// so gatebridge is never a task of the command's memory cgroup, whose
	// OOM killer would otherwise pick it (its RSS beats a command made of
	// small processes, or of tmpfs pages no kill frees).
	Started func()
	// Reap registers the process group with the reaper (see reapGroup)
	// while the command runs: if gatebridge dies, the reaper kills it.
	Reap bool
}
