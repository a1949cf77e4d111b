//go:build unix

package hostilefs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// CanMkfifoAt reports whether [MkfifoAt] works on this system (mknodat is
// not in x/sys for every Unix).
const CanMkfifoAt = canMkfifoAt

// MkfifoAt makes the FIFO name under dirfd: mode 0660 less the umask, so
// that under a default ACL the mask lets the ACL's users open it. ENOTSUP
// where [CanMkfifoAt] is false.
func MkfifoAt(dirfd int, name string) error { return mkfifoAt(dirfd, name) }

// MkfifoForOwnerAt makes the FIFO name under dirfd for the directory's
// owner, so that a sandbox process owning the directory can open it when
// the host is another user (root). It is best effort: on any failure
// nothing is left at name, and the caller (a wrapper) makes its own.
//
// The FIFO is made with mknodat under a temporary name (never follows,
// EEXIST if anything is there), handed over through an fd whose inode was
// checked to be the FIFO just made (never chown by name, so a swapped-in
// link cannot redirect the chown), and only then linked to name (EEXIST
// if the sandbox made its own): the sandbox never sees a FIFO at name it
// cannot open.
func MkfifoForOwnerAt(dirfd int, name string) {
	tmp := "." + name + "-host"
	var dst unix.Stat_t
	if unix.Fstat(dirfd, &dst) != nil {
		return
	}
	if mkfifoAt(dirfd, tmp) != nil {
		return
	}
	defer unix.Unlinkat(dirfd, tmp, 0)
	uid, gid := unix.Geteuid(), unix.Getegid()
	if int(dst.Uid) != uid || int(dst.Gid) != gid {
		fd, err := unix.Openat(dirfd, tmp, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Nlink != 1 || int(st.Uid) != uid {
			return
		}
		if unix.Fchown(fd, int(dst.Uid), int(dst.Gid)) != nil {
			return // the sandbox user could not open a FIFO we own: it makes its own
		}
	}
	unix.Linkat(dirfd, tmp, dirfd, name, 0)
}

// errNotFIFO refuses a wake entry that is something else.
var errNotFIFO = errors.New("is not a FIFO (refused)")

// WakeAt writes one byte to the FIFO name under dirfd if someone reads it.
// It never blocks, and a missing FIFO, one without a reader or a full one
// is not an error; anything but a FIFO at name is refused.
func WakeAt(dirfd int, name string) error {
	st, err := StatAt(dirfd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // no wake FIFO: the client polls
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return &FileError{name, errNotFIFO}
	}
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ENXIO) {
			return nil
		}
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return &FileError{name, errNotFIFO}
	}
	_, err = ignoringEINTR(func() (int, error) { return unix.Write(fd, []byte{'\n'}) })
	switch {
	case errors.Is(err, unix.EAGAIN):
		return nil // pipe full: the reader has plenty to wake it
	case errors.Is(err, unix.EPIPE):
		// The reader closed between our open and write: it saw what it
		// waited for before blocking and left. Nothing to wake.
		return nil
	}
	return err
}

// HasReader reports whether the FIFO name under dirfd is open for reading
// by someone (a waiting wrapper): opening it O_WRONLY|O_NONBLOCK gives
// ENXIO when no one is. known is false when that cannot be told (no FIFO,
// not a FIFO, any other error).
func HasReader(dirfd int, name string) (reader, known bool) {
	st, err := StatAt(dirfd, name)
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
