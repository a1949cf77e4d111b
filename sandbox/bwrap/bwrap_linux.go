//go:build linux

package bwrap

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
)

// nsTree is the pid namespace of a bwrap sandbox. bwrap itself (main) is
// outside it: a signal to bwrap would kill it at once and, through
// --die-with-parent, the sandbox without grace, so Terminate signals the
// namespace's processes instead.
type nsTree struct {
	main *os.Process
	st   *bwrapStatus
}

func newNSTree(main *os.Process, st *bwrapStatus) proc.Tree { return &nsTree{main: main, st: st} }

// nsWait bounds how long a signal waits for bwrap's report of the pid
// namespace it is for (see bwrapStatus.waitNS).
const nsWait = 2 * time.Second

// members returns the live processes of the sandbox's pid namespace, its
// init first, and whether the namespace is known yet.
func (t *nsTree) members() ([]int, bool) {
	initPid, ns := t.st.ns()
	if ns == 0 {
		return nil, false
	}
	want := "pid:[" + strconv.FormatUint(ns, 10) + "]"
	pids := []int{}
	proc.Scan(func(pid int, stat proc.Stat) bool {
		if stat.State == 'Z' || stat.State == 'X' {
			return true
		}
		// /proc/<pid>/ns/pid names the namespace the process lives in.
		if link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err == nil && link == want {
			if pid == initPid {
				pids = append([]int{pid}, pids...)
			} else {
				pids = append(pids, pid)
			}
		}
		return true
	})
	return pids, true
}

func (t *nsTree) Terminate() {
	initPid, _ := t.st.ns()
	pids, ok := t.members()
	if !ok {
		// Still setting up: there is nothing to stop gracefully.
		t.main.Signal(syscall.SIGKILL)
		return
	}
	for _, pid := range pids {
		if pid != initPid { // init ignores signals from outside anyway
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// Signal sends sig to every process of the namespace but its init (which
// ignores signals from outside; it ends when the command's process does).
func (t *nsTree) Signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		t.Kill()
		return
	}
	t.st.waitNS(nsWait)
	initPid, _ := t.st.ns()
	pids, _ := t.members()
	for _, pid := range pids {
		if pid != initPid {
			syscall.Kill(pid, sig)
		}
	}
}

func (t *nsTree) Kill() {
	pids, _ := t.members()
	// Killing init takes the namespace down; kill the rest too so they do
	// not run on while the kernel gets there.
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.main.Signal(syscall.SIGKILL) // no-op once reaped (pidfd)
}

func (t *nsTree) Alive() bool {
	pids, _ := t.members()
	return len(pids) > 0
}

// newSessionKeyring makes the calling thread join a new anonymous session
// keyring, so the sandbox it starts does not possess (cannot list, read or
// clear) the invoker's session keyring, which it would otherwise inherit
// whatever uid it runs as. Key serials of other users' keys stay
// unreadable through the normal key permissions.
func newSessionKeyring() error {
	_, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	if errno != 0 && errno != unix.ENOSYS {
		return fmt.Errorf("join a new session keyring: %w", errno)
	}
	return nil
}
