package mailbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// makeWakeAt creates the wake FIFO of a call that is not ready yet, owned
// by the owner of the call directory, so the wrapper can skip its own
// mkfifo (a process start, about a third of a call's cost). It is a
// best-effort extension: on any failure the FIFO is removed or left to the
// wrapper, which makes one itself when it finds none.
//
// The FIFO is made with mknodat under a temporary name (never follows,
// EEXIST if anything is there), handed over through an fd whose inode was
// checked to be the FIFO just made (never chown by name, so a swapped-in
// link cannot redirect the chown), and only then linked to "wake" (EEXIST
// if the wrapper made its own): the wrapper never sees a wake FIFO it
// cannot open. Publishing it before the chown let a fast wrapper find a
// FIFO owned by the host and fail to open it.
func makeWakeAt(dirFd int) {
	const tmp = ".wake-host"
	name := FileWake
	var dst unix.Stat_t
	if unix.Fstat(dirFd, &dst) != nil {
		return
	}
	if mkfifoAt(dirFd, tmp) != nil {
		return
	}
	defer unix.Unlinkat(dirFd, tmp, 0)
	uid, gid := unix.Geteuid(), unix.Getegid()
	if int(dst.Uid) != uid || int(dst.Gid) != gid {
		fd, err := unix.Openat(dirFd, tmp, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Nlink != 1 || int(st.Uid) != uid {
			return
		}
		if unix.Fchown(fd, int(dst.Uid), int(dst.Gid)) != nil {
			return // the sandbox user could not open a FIFO we own: the wrapper makes its own
		}
	}
	unix.Linkat(dirFd, tmp, dirFd, name, 0)
}

// hasReader reports whether the FIFO name under dirfd is open for reading
// by someone (the waiting wrapper): opening it O_WRONLY|O_NONBLOCK gives
// ENXIO when no one is. ok is false when that cannot be told (no FIFO, not
// a FIFO, any other error).
func hasReader(dirfd int, name string) (reader, ok bool) {
	st, err := statAt(dirfd, name)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false, false
	}
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	})
	if errors.Is(err, unix.ENXIO) {
		return false, true
	}
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false, false
	}
	return true, true
}
