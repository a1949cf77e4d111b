//go:build linux

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"golang.org/x/sys/unix"
)

// nsTree is the pid namespace of a bwrap sandbox. bwrap itself (main) is
// outside it: a signal to bwrap would kill it at once and, through
// --die-with-parent, the sandbox without grace, so terminate signals the
// namespace's processes instead.
type nsTree struct {
	main *os.Process
	st   *bwrapStatus
}

func newNSTree(main *os.Process, st *bwrapStatus) procTree { return &nsTree{main: main, st: st} }

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
	scanProc(func(pid int, stat procStat) bool {
		if stat.state == 'Z' || stat.state == 'X' {
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

func (t *nsTree) terminate() {
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

// signal sends sig to every process of the namespace but its init (which
// ignores signals from outside; it ends when the command's process does).
func (t *nsTree) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		t.kill()
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

func (t *nsTree) kill() {
	pids, _ := t.members()
	// Killing init takes the namespace down; kill the rest too so they do
	// not run on while the kernel gets there.
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.main.Signal(syscall.SIGKILL) // no-op once reaped (pidfd)
}

func (t *nsTree) alive() bool {
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

// pinPaths opens each workspace-relative path of rels under workspace,
// walking one component at a time without following a link, as O_PATH
// descriptors for bwrap's --bind-fd and --ro-bind-fd: bwrap then mounts
// the object opened here (and checks that it did), not whatever the path
// names by the time it mounts. Another sandbox writing the same workspace
// could otherwise swap a checked directory for a symbolic link to a host
// directory in between, and this sandbox would get that directory, a
// protected path's parent read-write. A symbolic link is refused; a
// parent (dirs[i]) must be a directory.
func pinPaths(workspace string, rels []string, dirs []bool) ([]*os.File, error) {
	ws, err := hostilefs.OpenDir(workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for i, rel := range rels {
		rel = filepath.ToSlash(rel)
		dir, base := path.Split(rel)
		d, err := ws.Walk(path.Clean(dir), hostilefs.WalkOptions{})
		if err != nil {
			return fail(err)
		}
		fd, err := unix.Openat(d.Fd(), base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		d.Close()
		if err != nil {
			return fail(&fs.PathError{Op: "open", Path: rel, Err: err})
		}
		f := os.NewFile(uintptr(fd), filepath.Join(workspace, rel))
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			return fail(&fs.PathError{Op: "stat", Path: rel, Err: err})
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			f.Close()
			return fail(&fs.PathError{Op: "open", Path: rel, Err: hostilefs.ErrSymlink})
		case dirs[i] && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			f.Close()
			return fail(&fs.PathError{Op: "open", Path: rel, Err: hostilefs.ErrNotDir})
		}
		files = append(files, f)
	}
	return files, nil
}
