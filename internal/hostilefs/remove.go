//go:build unix

package hostilefs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

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
	return RemoveTreeAt(parent, filepath.Base(path), d)
}

// RemoveTreeAt is [RemoveTreeWithin] of the entry name under dirfd.
func RemoveTreeAt(dirfd int, name string, d time.Duration) error {
	budget := RemoveMaxEntries
	return removeTreeAt(dirfd, name, &budget, time.Now().Add(d))
}

// RemoveAllAt removes name under dirfd and everything below it (see
// [RemoveTreeWithin]), visiting at most *budget entries, which it
// decrements (what it leaves stays under name): a hostile tree cannot make
// the host walk forever.
func RemoveAllAt(dirfd int, name string, budget *int) error {
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
	if fe, ok := err.(*FileError); ok { // from OpenDirAt: names name already
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
			if _, serr := StatAt(r.top, to); serr == nil {
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
	fd, err := OpenDirAt(parent, name)
	if errors.Is(err, unix.EACCES) && chmodDirAt(parent, name) == nil {
		fd, err = OpenDirAt(parent, name)
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
