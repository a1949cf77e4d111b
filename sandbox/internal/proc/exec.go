package sandbox

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

// procTree signals every process a started command consists of.
type procTree interface {
	// terminate sends SIGTERM to every process of the command.
	terminate()
	// kill sends SIGKILL to every process of the command.
	kill()
	// signal sends sig to every process of the command (Spec.Signals).
	signal(sig syscall.Signal)
	// alive reports whether a process of the command other than the main
	// one (already reaped) still runs. Zombies do not count.
	alive() bool
}

// process is one OS process a backend starts for a Spec.
type process struct {
	backend string
	path    string // executable, already resolved
	args    []string
	env     []string
	dir     string
	extra   []*os.File // ExtraFiles: fd 3, 4, …
	// tree returns the procTree of the started main process.
	tree func(main *os.Process) procTree
	// deathSignal is sent to the process when gatebridge dies; 0 means
	// SIGKILL.
	deathSignal syscall.Signal
	// cred, when set, starts the process as that user (gatebridge is root).
	cred *syscall.Credential
	// prepare, when set, runs on the OS thread that starts the process,
	// just before it does; that thread is then discarded, not reused.
	prepare func() error
	// started, when set, runs on that thread as soon as the process has
	// started (or failed to): the thread leaves the cgroup prepare joined,
	// so gatebridge is never a task of the command's memory cgroup, whose
	// OOM killer would otherwise pick it (its RSS beats a command made of
	// small processes, or of tmpfs pages no kill frees).
	started func()
	// reap registers the process group with the reaper (see reapGroup)
	// while the command runs: if gatebridge dies, the reaper kills it.
	reap bool
}

// noCgroupError says this host offers gatebridge no cgroup to enforce
// limits with (not root, cgroup v2): the command runs without them, as
// doctor reports. Any other error of newLimitCgroup means the cgroup
// could be made but not set up as asked, and the run is refused.
type noCgroupError struct{ err error }

func (e *noCgroupError) Error() string { return e.err.Error() }
func (e *noCgroupError) Unwrap() error { return e.err }
