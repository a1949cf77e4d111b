package bridge

import (
	"golang.org/x/sys/unix"
)

// makeWakeAt creates the wake FIFO of a call that is not ready yet, owned
// by the owner of the call directory, so the wrapper can skip its own
// mkfifo (a process start, about a third of a call's cost). It is a
// best-effort extension: on any failure the FIFO is removed or left to the
// wrapper, which makes one itself when it finds none.
//
// The name is created with mknodat (never follows, EEXIST if anything is
// there); ownership is changed through an fd whose inode was checked to be
// the FIFO just made, never by name, so a swapped-in link cannot redirect
// the chown.
func makeWakeAt(dirFd int) {
	var dst unix.Stat_t
	if unix.Fstat(dirFd, &dst) != nil {
		return
	}
	if unix.Mknodat(dirFd, "wake", unix.S_IFIFO|0o600, 0) != nil {
		return
	}
	uid, gid := unix.Geteuid(), unix.Getegid()
	if int(dst.Uid) == uid && int(dst.Gid) == gid {
		return
	}
	fd, err := unix.Openat(dirFd, "wake", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Nlink != 1 || int(st.Uid) != uid {
		return
	}
	if unix.Fchown(fd, int(dst.Uid), int(dst.Gid)) != nil {
		// The sandbox user could not open a FIFO we own: let the wrapper
		// make its own.
		unix.Unlinkat(dirFd, "wake", 0)
	}
}
