//go:build linux

package bwrap

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pinPath opens p (absolute, symlinks resolved) as an O_PATH descriptor
// for bwrap to mount from, and checks that what it opened is p: a
// component swapped for a symlink since p was resolved is refused.
func pinPath(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	got, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || got != p || unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		f.Close()
		return nil, fmt.Errorf("%s changed since it was resolved (a link now, or elsewhere: %q): refusing to mount it", p, got)
	}
	return f, nil
}

// dataFile returns a descriptor of an anonymous file holding b, at its
// start (bwrap's --ro-bind-data reads it to its end).
func dataFile(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("gatebridge-etc", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "gatebridge-etc")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// stopNamespace kills what is left of the pid namespace bwrap reported in
// st, by killing its init (the kernel then kills the rest), and waits
// until the init is gone or a zombie: its namespace is empty then.
func stopNamespace(st *bwrapStatus) {
	initPid, ns := st.ns()
	if initPid <= 0 || ns == 0 {
		return
	}
	want := "pid:[" + strconv.FormatUint(ns, 10) + "]"
	nsLink := "/proc/" + strconv.Itoa(initPid) + "/ns/pid"
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The pid may have been reused: act only on that namespace's init.
		if link, err := os.Readlink(nsLink); err != nil || link != want || zombie(initPid) {
			return
		}
		syscall.Kill(initPid, syscall.SIGKILL)
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and awaits its reaping.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// isolateAttr is a copy of a with the credential to start bwrap as and a
// parent-death signal (bwrap dies with the thread that started it).
func isolateAttr(a *syscall.SysProcAttr, cred *syscall.Credential) *syscall.SysProcAttr {
	n := &syscall.SysProcAttr{}
	if a != nil {
		*n = *a
	}
	n.Credential = cred
	n.Pdeathsig = syscall.SIGKILL
	return n
}

// unreachable says why uid:gid (no supplementary groups) cannot reach p,
// a resolved absolute path, as the program needs it (read, and write or
// execute), from the mode bits of p and of every directory above it; ""
// when it can, or when an ACL (which this does not read) may decide.
func unreachable(p string, uid, gid uint32, write, exec bool) string {
	may := func(path string, st *unix.Stat_t, need uint32) bool {
		if n, err := unix.Getxattr(path, "system.posix_acl_access", nil); err == nil && n > 0 {
			return true // an ACL decides: leave it to the kernel
		}
		mode := st.Mode & 0o777
		switch {
		case st.Uid == uid:
			mode >>= 6
		case st.Gid == gid:
			mode >>= 3
		}
		return mode&need == need
	}
	cur := "/"
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, part := range parts {
		var st unix.Stat_t
		if err := unix.Stat(cur, &st); err != nil {
			return ""
		}
		if !may(cur, &st, 1) {
			return fmt.Sprintf("%s is mode %o, owner %d:%d: uid %d cannot pass through it", cur, st.Mode&0o777, st.Uid, st.Gid, uid)
		}
		cur = filepath.Join(cur, part)
		if i < len(parts)-1 || part == "" {
			continue
		}
		if err := unix.Stat(cur, &st); err != nil {
			return ""
		}
		need := uint32(4)
		if write {
			need |= 2
		}
		if exec || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			need |= 1
		}
		if !may(cur, &st, need) {
			return fmt.Sprintf("%s is mode %o, owner %d:%d: uid %d cannot %s it", cur, st.Mode&0o777, st.Uid, st.Gid, uid,
				map[bool]string{true: "write", false: "read"}[write])
		}
	}
	return ""
}
