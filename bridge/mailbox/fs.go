package mailbox

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Errors for hostile or malformed entries in calls/, returned wrapped in an
// [*FileError] by [CallDir.Read] and friends. They end up in the caller's
// stderr and in the call record, so they name what was wrong without
// echoing file contents.
var (
	ErrSymlink    = errors.New("is a symbolic link (refused)")
	ErrNotRegular = errors.New("is not a regular file (refused)")
	ErrNotDir     = errors.New("is not a directory (refused)")
	ErrHardLink   = errors.New("has more than one hard link (refused)")
	ErrTooLarge   = errors.New("exceeds the size limit")
)

// FileError names the file an error is about, relative to the call.
type FileError struct {
	Name string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s %v", e.Name, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// Refused reports whether err is a refusal of a hostile entry (a symlink,
// a special file, a hard link, a file where a directory belongs) rather than
// a malformed call.
func Refused(err error) bool {
	return errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) || errors.Is(err, ErrHardLink) || errors.Is(err, ErrNotDir)
}

func ignoringEINTR[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if err != unix.EINTR {
			return v, err
		}
	}
}

// openDirAt opens the directory name (a single path component) under
// dirfd without following a symlink.
func openDirAt(dirfd int, name string) (int, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ELOOP):
		return -1, &FileError{name, ErrSymlink}
	case errors.Is(err, unix.ENOTDIR):
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, &FileError{name, ErrSymlink}
		}
		return -1, &FileError{name, ErrNotDir}
	default:
		return -1, &FileError{name, err}
	}
}

// statAt is lstat relative to dirfd.
func statAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	_, err := ignoringEINTR(func() (int, error) { return 0, unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
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

// readFileAt reads the regular file name under dirfd, refusing symlinks,
// special files, hard links and anything larger than max bytes. It never
// blocks on a FIFO or device: those are refused before open, and the open
// itself is O_NONBLOCK in case the entry was swapped in between.
func readFileAt(dirfd int, name string, max int64) ([]byte, error) {
	b, _, err := readFileStatAt(dirfd, name, max)
	return b, err
}

// readFileStatAt is readFileAt that also returns the stat of the file it
// read, taken on the open fd: the same file as the bytes.
func readFileStatAt(dirfd int, name string, max int64) ([]byte, unix.Stat_t, error) {
	st, err := statAt(dirfd, name)
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

// readDirNames lists up to max+1 entries of the directory fd (without
// closing it).
func readDirNames(fd int, max int) ([]string, error) {
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

// writeFileAtomic writes data to name under dirfd: a temp file created with
// O_EXCL|O_NOFOLLOW in the same directory, then renamed over name. rename
// replaces a planted symlink rather than following it. The mode is 0640:
// only the session's directories and, when gatebridge is root, the grant
// to the sandbox's uid (an ACL whose mask is these group bits, or group
// ownership) decide who else reads it; never "other".
func writeFileAtomic(dirfd int, name string, data []byte, tmpSuffix string) error {
	return writeFileAtomicMode(dirfd, name, data, tmpSuffix, 0)
}

// writeFileAtomicMode is writeFileAtomic with mode set on the temp file
// before it is renamed (0: 0640 less the umask).
func writeFileAtomicMode(dirfd int, name string, data []byte, tmpSuffix string, mode uint32) error {
	tmp := ".tmp-" + name + "-" + tmpSuffix
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if mode != 0 {
		if err := unix.Fchmod(fd, mode); err != nil {
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

// wakeAt writes one byte to the FIFO name under dirfd, if it is a FIFO with
// a reader. It never blocks: no reader gives ENXIO, reported as nil.
func wakeAt(dirfd int, name string) error {
	st, err := statAt(dirfd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // no wake FIFO: the client polls
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return &FileError{name, errors.New("is not a FIFO (refused)")}
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
		return &FileError{name, errors.New("is not a FIFO (refused)")}
	}
	_, err = ignoringEINTR(func() (int, error) { return unix.Write(fd, []byte{'\n'}) })
	switch {
	case errors.Is(err, unix.EAGAIN):
		return nil // pipe full: the reader has plenty to wake it
	case errors.Is(err, unix.EPIPE):
		// The reader closed between our open and write: the wrapper saw
		// .exit before blocking and left. Nothing to wake.
		return nil
	}
	return err
}

// makeAccessible gives the directory name under dirfd mode 0700 (the
// sandbox, running as us, may have made it 000 to make it hard to
// delete), never following a symlink swapped in (see chmodDirAt).
func makeAccessible(dirfd int, name string) bool {
	return chmodDirAt(dirfd, name) == nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// RemoveTree removes the directory path and everything in it, never
// following a symlink, also when the sandbox made parts of it unreadable
// (os.RemoveAll gives up on a directory chmodded 000).
func RemoveTree(path string) error {
	parent, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	defer unix.Close(parent)
	budget := math.MaxInt
	return removeAllAt(parent, filepath.Base(path), &budget)
}

// removeAllAt removes name under dirfd and everything below it, never
// following symlinks.
func removeAllAt(dirfd int, name string, budget *int) error {
	if *budget <= 0 {
		return errors.New("too many entries to remove")
	}
	*budget--
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	// An empty directory (most of a session's) goes in one call; rmdir
	// follows no link. Anything else is walked.
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	fd, err := openDirAt(dirfd, name)
	if errors.Is(err, unix.EACCES) && makeAccessible(dirfd, name) {
		fd, err = openDirAt(dirfd, name)
	}
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&0o700 != 0o700 {
		makeAccessible(dirfd, name) // listable is not enough: entries need w+x
	}
	names, rerr := readDirNames(fd, *budget)
	for _, n := range names {
		if err := removeAllAt(fd, n, budget); err != nil {
			unix.Close(fd)
			return err
		}
	}
	unix.Close(fd)
	if rerr != nil {
		return rerr
	}
	err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
