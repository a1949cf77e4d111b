package mailbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The readers below are the calls/ readers' rules, exported for the other
// directories a sandbox writes and the host reads (the command agent's
// out/, package sandbox/agent): nothing is followed, only regular files
// with one link are read, and every read is capped.

// OpenDir opens the host directory path, refusing a symlink in its last
// component (the parents are the host's own), and returns its fd.
func OpenDir(path string) (int, error) {
	return openDirAt(unix.AT_FDCWD, filepath.Clean(path))
}

// ReadFileAt reads the regular file name under dirfd: a symlink, a special
// file, a hard link or more than max bytes is refused with a [*FileError].
func ReadFileAt(dirfd int, name string, max int64) ([]byte, error) {
	return readFileAt(dirfd, name, max)
}

// ReadFileStatAt is [ReadFileAt] that also returns the stat of the file it
// read, taken on the fd it read: owner, mode and times belong to those
// bytes, not to whatever the sandbox renamed into place since.
func ReadFileStatAt(dirfd int, name string, max int64) ([]byte, unix.Stat_t, error) {
	return readFileStatAt(dirfd, name, max)
}

// OpenFileAt opens the regular file name under dirfd for reading as it
// grows (a stream the sandbox appends to), with the same refusals as
// [ReadFileAt]; os.ErrNotExist (wrapped) when there is none yet. With
// write set it asks for read-write access first (to free what was read:
// [PunchHole]) and falls back to read-only.
func OpenFileAt(dirfd int, name string, write bool) (*os.File, error) {
	st, err := statAt(dirfd, name)
	if err != nil {
		return nil, &FileError{name, err}
	}
	if err := checkRegular(name, &st); err != nil {
		return nil, err
	}
	flags := unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	open := func(mode int) (int, error) {
		return ignoringEINTR(func() (int, error) { return unix.Openat(dirfd, name, flags|mode, 0) })
	}
	fd := -1
	if write {
		fd, err = open(unix.O_RDWR)
	}
	if fd < 0 {
		fd, err = open(unix.O_RDONLY)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, &FileError{name, ErrSymlink}
		}
		return nil, &FileError{name, err}
	}
	// Swapped between the stat and the open: check what was opened.
	if err := unix.Fstat(fd, &st); err == nil {
		err = checkRegular(name, &st)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// PunchHole frees the first n bytes of f's storage, keeping its size and
// offsets (a file opened read-write by [OpenFileAt]); a filesystem that
// cannot is not an error worth more than the return value.
func PunchHole(f *os.File, n int64) error {
	if n <= 0 {
		return nil
	}
	return punchHole(int(f.Fd()), n)
}

// ListDir lists up to max+1 names of the directory fd.
func ListDir(fd int, max int) ([]string, error) { return readDirNames(fd, max) }

// WriteFileAt writes data to name under dirfd atomically (an O_EXCL temp
// file renamed over name, never following a link) with mode (0: 0640).
func WriteFileAt(dirfd int, name string, data []byte, mode os.FileMode) error {
	return writeFileAtomicMode(dirfd, name, data, fmt.Sprint(os.Getpid()), uint32(mode.Perm()))
}

// MkfifoAt makes the FIFO name under dirfd (mode 0660 less the umask).
func MkfifoAt(dirfd int, name string) error { return mkfifoAt(dirfd, name) }

// WakeAt writes one byte to the FIFO name under dirfd if someone reads it;
// it never blocks, and a missing FIFO or one without a reader is not an
// error.
func WakeAt(dirfd int, name string) error { return wakeAt(dirfd, name) }
