//go:build unix

package hostilefs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The Dir methods below are what a file API over a tree the sandbox
// writes needs besides [Dir.Walk] and [Dir.WriteAtomicFrom]: each takes
// one component of a directory a walk opened, follows no link, opens no
// FIFO or device for real (O_NONBLOCK, checked again on the fd), and
// refuses a regular file with more than one link (a hard link to a file
// the caller would not name, such as a protected one). Refusals are
// [*FileError]s ([Refused]).

// OpenFile opens the regular file name in d for reading and describes
// it (stat taken on the opened fd).
func (d *Dir) OpenFile(name string) (*os.File, Info, error) {
	if !validName(name) {
		return nil, Info{}, &FileError{name, ErrBadPath}
	}
	f, err := OpenFileAt(d.fd, name, false)
	if err != nil {
		return nil, Info{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, Info{}, &FileError{name, err}
	}
	return f, infoOf(&st), nil
}

// OpenWrite opens the regular file name in d for writing in place (at an
// offset, or appending): a symlink, a special file or a file with more
// than one link is refused. When there is none and create is set, it is
// made with O_EXCL (mode o.Perm, owner o.Owner); else the error wraps
// ENOENT.
func (d *Dir) OpenWrite(name string, create bool, o WriteOptions) (*os.File, error) {
	if !validName(name) {
		return nil, &FileError{name, ErrBadPath}
	}
	flags := unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	st, err := StatAt(d.fd, name)
	made := false
	switch {
	case errors.Is(err, unix.ENOENT) && create:
		flags |= unix.O_CREAT | unix.O_EXCL
		made = true
	case err != nil:
		return nil, &FileError{name, err}
	default:
		if err := checkRegular(name, &st); err != nil {
			return nil, err
		}
	}
	fd, err := ignoringEINTR(func() (int, error) { return unix.Openat(d.fd, name, flags, uint32(o.Perm.Perm())) })
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, &FileError{name, ErrSymlink}
		}
		if errors.Is(err, unix.ENXIO) { // a FIFO swapped in, without a reader
			return nil, &FileError{name, ErrNotRegular}
		}
		return nil, &FileError{name, err}
	}
	// Swapped between the stat and the open: check what was opened.
	var fst unix.Stat_t
	if err = unix.Fstat(fd, &fst); err == nil {
		err = checkRegular(name, &fst)
	}
	if err == nil && made && o.Owner != nil {
		err = chownNew(fd, d.fd, *o.Owner)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Mkdir makes the directory name in d: mode o.Perm (less the umask
// unless o.ExactPerm), owner o.Owner; an entry already there fails with
// an error wrapping fs.ErrExist.
func (d *Dir) Mkdir(name string, o WalkOptions) error {
	if !validName(name) {
		return &FileError{name, ErrBadPath}
	}
	if _, err := StatAt(d.fd, name); err == nil {
		return &FileError{name, fs.ErrExist}
	}
	fd, err := mkdirAt(d.fd, name, o.Perm, o.ExactPerm, o.Owner)
	if err != nil {
		return &FileError{name, err}
	}
	return unix.Close(fd)
}

// Remove removes the entry name in d, never following it: a file, a
// symlink (not its target) or an empty directory; with all, a directory
// and everything in it ([RemoveTreeAt], within [RemoveMaxTime]).
func (d *Dir) Remove(name string, all bool) error {
	if !validName(name) {
		return &FileError{name, ErrBadPath}
	}
	st, err := StatAt(d.fd, name)
	if err != nil {
		return &FileError{name, err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err = unix.Unlinkat(d.fd, name, 0)
	} else if all {
		return RemoveTreeAt(d.fd, name, RemoveMaxTime)
	} else {
		err = unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &FileError{name, err}
	}
	return nil
}

// Rename moves the entry name in d to newName in nd (a link is moved, not
// followed); with replace unset, an entry at newName fails with EEXIST
// rather than being replaced.
func (d *Dir) Rename(name string, nd *Dir, newName string, replace bool) error {
	if !validName(name) {
		return &FileError{name, ErrBadPath}
	}
	if !validName(newName) {
		return &FileError{newName, ErrBadPath}
	}
	var err error
	if replace {
		err = unix.Renameat(d.fd, name, nd.fd, newName)
	} else {
		err = renameNoReplace(d.fd, name, nd.fd, newName)
	}
	if err != nil {
		return &FileError{name, err}
	}
	return nil
}

// ReadDir lists up to max entries of d (lstat of each; an entry removed
// meanwhile is left out) and reports whether there were more.
func (d *Dir) ReadDir(max int) ([]DirEntry, bool, error) {
	names, err := ListDir(d.fd, max)
	if err != nil {
		return nil, false, err
	}
	more := len(names) > max
	if more {
		names = names[:max]
	}
	out := make([]DirEntry, 0, len(names))
	for _, n := range names {
		st, err := StatAt(d.fd, n)
		if err != nil {
			continue
		}
		out = append(out, DirEntry{Name: n, Info: infoOf(&st), ModTime: time.Unix(st.Mtim.Unix())})
	}
	return out, more, nil
}

// LstatTime is [Dir.Lstat] with the entry's modification time.
func (d *Dir) LstatTime(name string) (Info, time.Time, error) {
	if !validName(name) {
		return Info{}, time.Time{}, &fs.PathError{Op: "stat", Path: name, Err: ErrBadPath}
	}
	st, err := StatAt(d.fd, name)
	if err != nil {
		return Info{}, time.Time{}, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return infoOf(&st), time.Unix(st.Mtim.Unix()), nil
}

// NotRegularError is the refusal of a special file (a FIFO, a device, a
// socket) by [Dir.ReplaceFrom]; it is [ErrNotRegular] and says which.
type NotRegularError struct{ Mode fs.FileMode }

func (e *NotRegularError) Error() string   { return ErrNotRegular.Error() }
func (e *NotRegularError) Is(t error) bool { return t == ErrNotRegular }

// ReplaceFrom replaces the file name in d, or makes it, with what r holds
// (at most max bytes, max < 0: no bound), atomically
// ([Dir.WriteAtomicFrom]): a symlink at name is refused ([ErrSymlink],
// never written through), a directory is EISDIR, anything else that is
// not a regular file a [*NotRegularError], each inside a [*FileError]. A
// file replaced keeps its mode and, when o.Owner is set, its owner and
// group; a new one gets o's. The write is the only use of name after the
// check: the rename replaces whatever the sandbox put there meanwhile.
func (d *Dir) ReplaceFrom(name string, r io.Reader, max int64, o WriteOptions) (int64, error) {
	fi, err := d.Lstat(name)
	switch m := fi.Mode; {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	case m&fs.ModeSymlink != 0:
		return 0, &FileError{name, ErrSymlink}
	case m.IsDir():
		return 0, &FileError{name, unix.EISDIR}
	case !m.IsRegular():
		return 0, &FileError{name, &NotRegularError{Mode: m}}
	default:
		o.Perm, o.ExactPerm = m.Perm(), true
		if o.Owner != nil {
			o.Owner = &Owner{UID: fi.UID, GID: fi.GID}
		}
	}
	return d.WriteAtomicFrom(name, r, max, o)
}
