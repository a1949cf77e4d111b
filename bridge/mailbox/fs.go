package mailbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

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

func itoa(n int) string { return strconv.Itoa(n) }

// Bounds of one removal ([RemoveTree]). A sandbox can fill its session
// with millions of entries, and a persistent sandbox can go on creating
// them while the host removes them (a process of it whose cwd is in a
// closed session's calls/): a removal visits at most RemoveMaxEntries
// entries and takes at most RemoveMaxTime, then fails with what is left
// still under the path, for the next try (`gatebridge prune`, or the prune
// of the next start) to go on with.
const (
	RemoveMaxEntries = 1 << 24
	RemoveMaxTime    = 30 * time.Second
)

var (
	errTooMany    = errors.New("too many entries to remove")
	errTooLong    = errors.New("removal took too long (is something still writing there?)")
	errMountPoint = errors.New("is on another filesystem (a mount point: not removed)")
	errSwapped    = errors.New("changed type while being removed")
)

// RemoveTree removes the directory path and everything in it (see
// [RemoveTreeWithin]) within [RemoveMaxTime].
func RemoveTree(path string) error { return RemoveTreeWithin(path, RemoveMaxTime) }

// RemoveTreeWithin removes the directory path and everything in it, never
// following a symlink, also when the sandbox made parts of it unreadable
// (os.RemoveAll gives up on a directory chmodded 000), at any depth with a
// handful of fds (see [remover]), and without crossing into another
// filesystem mounted below it. It gives up after d (or
// [RemoveMaxEntries] entries), leaving the rest under path. An error names
// the entry that could not be removed where it is now, relative to path
// (a directory moved up by the removal is under a .gb-rm-* name).
func RemoveTreeWithin(path string, d time.Duration) error {
	parent, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	defer unix.Close(parent)
	budget := RemoveMaxEntries
	return removeTreeAt(parent, filepath.Base(path), &budget, time.Now().Add(d))
}

// removeAllAt removes name under dirfd and everything below it (see
// [remover]), visiting at most *budget entries (what it leaves stays under
// name).
func removeAllAt(dirfd int, name string, budget *int) error {
	return removeTreeAt(dirfd, name, budget, time.Time{})
}

func removeTreeAt(dirfd int, name string, budget *int, until time.Time) error {
	r := &remover{top: -1, budget: budget, until: until,
		prefix: ".gb-rm-" + itoa(os.Getpid()) + "-" + strconv.FormatUint(removals.Add(1), 10) + "-"}
	return r.entry(dirfd, name, false)
}

// removals numbers the removals of this process (names of moved
// directories).
var removals atomic.Uint64

// A remover removes one tree without holding an fd per level: a directory
// chain deeper than the process may open files (a sandbox nests them in
// its calls/ at will) would otherwise fail with EMFILE and stay. It holds
// the top directory and at most one below it: the top's entries are
// emptied in place, and a non-empty directory found below one of them is
// not descended into but moved up (renameat2 RENAME_NOREPLACE, under a
// name of its own) into the top, to be emptied there in turn. Every
// directory is opened and listed once (again only when something was
// added meanwhile), so the work is linear in the entries at any depth, and
// what a removal that stops leaves is still under the top.
//
// Nothing is followed: entries are removed with unlinkat, directories
// opened with O_NOFOLLOW relative to their parent's fd, and a directory on
// another filesystem (a mount point) is left, with an error. A directory
// the sandbox made unreadable or unwritable is given mode 0700 first (it
// runs as us, or we are root).
type remover struct {
	top    int    // fd of the tree's top directory, once opened
	dev    uint64 // its device: nothing on another is removed
	prefix string // names of the directories moved up: prefix + a counter
	next   int
	staged []int // directories moved up, not yet removed
	budget *int
	until  time.Time // zero: no deadline
}

// removeError names an entry that could not be removed, relative to the
// top of the tree.
type removeError struct {
	path string
	err  error
}

func (e *removeError) Error() string { return e.path + ": " + e.err.Error() }
func (e *removeError) Unwrap() error { return e.err }

// under names err as being about name (a directory containing the entry
// it names, if it names one).
func under(name string, err error) error {
	if fatalRemove(err) {
		return err
	}
	if re, ok := err.(*removeError); ok {
		return &removeError{name + "/" + re.path, re.err}
	}
	if fe, ok := err.(*FileError); ok { // from openDirAt: names name already
		err = fe.Err
	}
	return &removeError{name, err}
}

// fatalRemove reports whether err ends the removal (rather than leaving one
// entry behind while the rest goes).
func fatalRemove(err error) bool { return errors.Is(err, errTooMany) || errors.Is(err, errTooLong) }

func (r *remover) spend() error {
	if *r.budget <= 0 {
		return errTooMany
	}
	*r.budget--
	if !r.until.IsZero() && *r.budget%64 == 0 && time.Now().After(r.until) {
		return errTooLong
	}
	return nil
}

// entry removes name under parent, whatever it is; isDir is what its
// directory listing said (a hint: the sandbox may swap it meanwhile).
func (r *remover) entry(parent int, name string, isDir bool) error {
	for range 8 { // the sandbox may swap a file and a directory meanwhile
		if err := r.spend(); err != nil {
			return err
		}
		var uerr error = unix.EISDIR
		if !isDir {
			uerr = unix.Unlinkat(parent, name, 0)
			if uerr == nil || errors.Is(uerr, unix.ENOENT) {
				return nil
			}
			if !errors.Is(uerr, unix.EISDIR) && !errors.Is(uerr, unix.EPERM) {
				return &removeError{name, uerr}
			}
		}
		// An empty directory (most of a session's) goes in one call;
		// rmdir follows no link.
		err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil || errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.ENOTDIR):
			if errors.Is(uerr, unix.EISDIR) {
				isDir = false
				continue // it was a directory a moment ago
			}
			return &removeError{name, uerr}
		case errors.Is(err, unix.EBUSY):
			return &removeError{name, errMountPoint}
		}
		if r.top < 0 || parent == r.top {
			err = r.dir(parent, name)
		} else {
			err = r.moveUp(parent, name)
		}
		if err != errSwapped {
			return err
		}
		isDir = false
	}
	return &removeError{name, errSwapped}
}

// moveUp moves the directory name under parent into the top, to be
// emptied there.
func (r *remover) moveUp(parent int, name string) error {
	chmodded := false
	for range 100 {
		to := r.prefix + itoa(r.next)
		err := renameNoReplace(parent, name, r.top, to)
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
			// No RENAME_NOREPLACE here: the top is the host's, so a name
			// free a moment ago is still free.
			if _, serr := statAt(r.top, to); serr == nil {
				err = unix.EEXIST
			} else {
				err = unix.Renameat(parent, name, r.top, to)
			}
		}
		switch {
		case err == nil:
			r.staged = append(r.staged, r.next)
			r.next++
			return nil
		case errors.Is(err, unix.ENOENT):
			return nil // gone meanwhile
		case errors.Is(err, unix.EEXIST):
			r.next++ // a name the sandbox took (when it can write the top)
		case (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && !chmodded:
			// Moving a directory to another parent rewrites its "..":
			// it must be writable.
			chmodDirAt(parent, name)
			chmodded = true
		default:
			return &removeError{name, err}
		}
	}
	return &removeError{name, errors.New("no free name to move it to")}
}

// dir empties the directory name under parent and removes it; the first
// directory it opens is the top.
func (r *remover) dir(parent int, name string) error {
	fd, err := openDirAt(parent, name)
	if errors.Is(err, unix.EACCES) && chmodDirAt(parent, name) == nil {
		fd, err = openDirAt(parent, name)
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotDir):
		return errSwapped
	case err != nil:
		return under(name, err)
	}
	// Listed through this fd itself (no second open per directory); the
	// *at calls use it too.
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return under(name, err)
	}
	isTop := r.top < 0
	if isTop {
		r.top, r.dev = fd, uint64(st.Dev)
		defer func() { r.top = -1 }()
	} else if uint64(st.Dev) != r.dev {
		return &removeError{name, errMountPoint}
	}
	if st.Mode&0o700 != 0o700 {
		chmodDirAt(parent, name) // listable is not enough: entries need w+x
	}
	wrap := func(err error) error {
		if isTop || err == nil {
			return err // named relative to the top
		}
		return under(name, err)
	}
	for idle := 0; ; {
		seen, err := r.empty(f, fd)
		for isTop && len(r.staged) > 0 && !fatalRemove(err) {
			n := r.staged[len(r.staged)-1]
			r.staged = r.staged[:len(r.staged)-1]
			if e := r.entry(fd, r.prefix+itoa(n), true); e != nil && (err == nil || fatalRemove(e)) {
				err = e
			}
		}
		if err != nil {
			return wrap(err)
		}
		err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			if isTop {
				return err
			}
			return &removeError{name, err}
		}
		// Something was added meanwhile: list it again. A directory that
		// lists empty but is not stops after a few tries.
		if seen == 0 {
			if idle++; idle == 3 {
				return wrap(err)
			}
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return wrap(err)
		}
	}
}

// empty removes what the directory f (fd) holds (directories below the
// top are moved up into it), reading its entries a batch at a time from
// where f's offset is. It goes on past an entry it cannot remove and
// returns the first such error, or at once an error that ends the
// removal.
func (r *remover) empty(f *os.File, fd int) (seen int, err error) {
	var first error
	for {
		ents, rerr := f.ReadDir(256)
		for _, e := range ents {
			seen++
			if err := r.entry(fd, e.Name(), e.IsDir()); err != nil {
				if fatalRemove(err) {
					return seen, err
				}
				if first == nil {
					first = err
				}
			}
		}
		if rerr == io.EOF || len(ents) == 0 {
			return seen, first
		}
		if rerr != nil {
			if first == nil {
				first = rerr
			}
			return seen, first
		}
	}
}
