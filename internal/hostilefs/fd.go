//go:build unix

package hostilefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The fd-relative readers and writers below serve directories the sandbox
// writes and the host reads entry by entry (a session's calls/, the
// command agent's out/): nothing is followed, only regular files with one
// link are read, every read is capped, and a refusal is a [*FileError]
// naming the entry. Their errors end up in the caller's stderr and in call
// records, so they name what was wrong without echoing file contents.

// Errors for entries the readers refuse, inside a [*FileError] (besides
// [ErrSymlink] and [ErrNotDir]).
var (
	ErrNotRegular = errors.New("is not a regular file")
	ErrHardLink   = errors.New("has more than one hard link")
	ErrTooLarge   = errors.New("exceeds the size limit")
)

// FileError names the entry an error is about, relative to the directory
// it was read from. A refusal ([Refused]) says so: "args/0 is a symbolic
// link (refused)".
type FileError struct {
	Name string
	Err  error
}

func (e *FileError) Error() string {
	if refusal(e.Err) {
		return e.Name + " " + e.Err.Error() + " (refused)"
	}
	return fmt.Sprintf("%s %v", e.Name, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

func refusal(err error) bool {
	return err == ErrSymlink || err == ErrNotRegular || err == ErrHardLink || err == ErrNotDir
}

// Refused reports whether err is a refusal of a hostile entry (a symlink,
// a special file, a hard link, a file where a directory belongs) rather
// than a malformed one or a failure.
func Refused(err error) bool {
	return errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) || errors.Is(err, ErrHardLink) || errors.Is(err, ErrNotDir)
}

// OpenDirAt opens the directory name (a single component) under dirfd
// without following a symlink, and returns its fd. A symlink is refused
// with [ErrSymlink], anything else that is not a directory with
// [ErrNotDir], inside a [*FileError]; so is any other failure (ENOENT:
// there is none).
func OpenDirAt(dirfd int, name string) (int, error) {
	fd, err := openDirAt(dirfd, name)
	if err == nil {
		return fd, nil
	}
	if err == ErrChanged {
		err = ErrNotDir // a directory again: the caller looks once more if it cares
	}
	return -1, &FileError{name, err}
}

// OpenDirNoFollow opens the host directory path, refusing a symlink in its
// last component (the parents are the host's own), and returns its fd.
func OpenDirNoFollow(path string) (int, error) {
	return OpenDirAt(unix.AT_FDCWD, filepath.Clean(path))
}

// StatAt is lstat relative to dirfd.
func StatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	_, err := ignoringEINTR(func() (int, error) { return 0, unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
}

// CheckRegularAt reports whether name under dirfd is a regular file with
// one link: nil if so; a [*FileError] wrapping the stat error (ENOENT:
// there is none) or the refusal otherwise.
func CheckRegularAt(dirfd int, name string) error {
	st, err := StatAt(dirfd, name)
	if err != nil {
		return &FileError{name, err}
	}
	return checkRegular(name, &st)
}

func checkRegular(name string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return &FileError{name, ErrSymlink}
	default:
		return &FileError{name, ErrNotRegular}
	}
	if st.Nlink > 1 {
		return &FileError{name, ErrHardLink}
	}
	return nil
}

// ReadFileAt reads the regular file name under dirfd: a symlink, a special
// file, a hard link or more than max bytes is refused with a [*FileError]
// (wrapping ENOENT when there is none). It never blocks on a FIFO or
// device: those are refused before the open, and the open itself is
// O_NONBLOCK in case the entry was swapped in between.
func ReadFileAt(dirfd int, name string, max int64) ([]byte, error) {
	b, _, err := ReadFileStatAt(dirfd, name, max)
	return b, err
}

// ReadFileStatAt is [ReadFileAt] that also returns the stat of the file it
// read, taken on the fd it read: owner, mode and times belong to those
// bytes, not to whatever the sandbox renamed into place since.
func ReadFileStatAt(dirfd int, name string, max int64) ([]byte, unix.Stat_t, error) {
	st, err := StatAt(dirfd, name)
	if err != nil {
		return nil, st, &FileError{name, err}
	}
	if err := checkRegular(name, &st); err != nil {
		return nil, st, err
	}
	if st.Size > max {
		return nil, st, &FileError{name, fmt.Errorf("%w (%d bytes, limit %d)", ErrTooLarge, st.Size, max)}
	}
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, st, &FileError{name, ErrSymlink}
		}
		return nil, st, &FileError{name, err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, &FileError{name, err}
	}
	if err := checkRegular(name, &st); err != nil {
		return nil, st, err
	}
	buf := make([]byte, 0, min(st.Size+1, max+1, 64<<10))
	b, err := readAllLimit(f, buf, max+1)
	if err != nil {
		return nil, st, &FileError{name, err}
	}
	if int64(len(b)) > max {
		return nil, st, &FileError{name, fmt.Errorf("%w (limit %d bytes)", ErrTooLarge, max)}
	}
	return b, st, nil
}

func readAllLimit(r io.Reader, b []byte, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// OpenFileAt opens the regular file name under dirfd for reading as it
// grows (a stream the sandbox appends to), with the same refusals as
// [ReadFileAt]; os.ErrNotExist (wrapped) when there is none yet. With
// write set it asks for read-write access first (to free what was read:
// [PunchHole]) and falls back to read-only.
func OpenFileAt(dirfd int, name string, write bool) (*os.File, error) {
	if err := CheckRegularAt(dirfd, name); err != nil {
		return nil, err
	}
	flags := unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	open := func(mode int) (int, error) {
		return ignoringEINTR(func() (int, error) { return unix.Openat(dirfd, name, flags|mode, 0) })
	}
	fd, err := -1, error(nil)
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
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err == nil {
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

// ListDir lists up to max+1 entry names of the directory fd (without
// closing it, and without moving its offset).
func ListDir(fd int, max int) ([]string, error) {
	// A fresh open of "." has its own offset (a dup would share fd's, so
	// two goroutines listing the same directory could skip entries).
	dup, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	var names []string
	for len(names) <= max {
		batch, err := f.Readdirnames(min(256, max+1-len(names)))
		names = append(names, batch...)
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return names, err
		}
	}
	return names, nil
}

// WriteFileAt writes data to name under dirfd atomically: a temp file
// created with O_EXCL|O_NOFOLLOW in the same directory, then renamed over
// name (rename replaces a planted symlink rather than following it). The
// file gets mode, whatever the umask; 0 means 0640 less the umask (then
// only the directory and, when the host is root, a grant to the sandbox's
// uid decide who else reads it; never "other"). A failed write leaves no
// temp file.
func WriteFileAt(dirfd int, name string, data []byte, mode os.FileMode) error {
	tmp := ".tmp-" + name + "-" + tmpSuffix()
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if mode != 0 {
		if err := unix.Fchmod(fd, uint32(mode.Perm())); err != nil {
			unix.Close(fd)
			unix.Unlinkat(dirfd, tmp, 0)
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("write %s: %w", name, werr)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("rename %s: %w", name, err)
	}
	return nil
}

// tmpSuffix names a temp file uniquely in this process and apart from
// another process's (the agent's, writing the same directory).
func tmpSuffix() string {
	return pidSuffix + strconv.FormatUint(tmpSerial.Add(1), 36)
}

var (
	tmpSerial atomic.Uint64
	pidSuffix = strconv.Itoa(os.Getpid()) + "-"
)

// RenameNoReplace moves old under oldDir to new under newDir, failing
// with EEXIST rather than replacing anything there (ENOTSUP where the
// system cannot promise that).
func RenameNoReplace(oldDir int, old string, newDir int, new string) error {
	return renameNoReplace(oldDir, old, newDir, new)
}

// CopyDefaultACL gives the directory toFd the default ACL of fromFd, as
// both its access and its default ACL: what it would have had if it had
// been made in fromFd. It reports whether fromFd had one (ENOTSUP where
// there are no POSIX ACLs).
func CopyDefaultACL(fromFd, toFd int) (bool, error) { return copyDefaultACL(fromFd, toFd) }

// WritableTmpfs reports whether dir is on a tmpfs (memory) and this process
// may create entries in it.
func WritableTmpfs(dir string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || !isTmpfs(&fs) {
		return false
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}
