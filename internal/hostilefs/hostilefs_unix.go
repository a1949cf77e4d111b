//go:build unix

package hostilefs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is an open directory. Its methods take single names or clean
// relative paths and never resolve them from anywhere but this directory.
type Dir struct {
	fd int
}

// OpenDir opens the directory at path, a path the host trusts (its own
// configuration, not something the sandbox named): symlinks in it are
// followed.
func OpenDir(path string) (*Dir, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd}, nil
}

// Fd is the directory's file descriptor, valid until Close.
func (d *Dir) Fd() int { return d.fd }

// Close closes the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Stat describes the directory itself.
func (d *Dir) Stat() (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return Info{}, &fs.PathError{Op: "stat", Path: ".", Err: err}
	}
	return infoOf(&st), nil
}

// Lstat describes the entry name (one component) in d, without following
// a symlink.
func (d *Dir) Lstat(name string) (Info, error) {
	if !validName(name) {
		return Info{}, &fs.PathError{Op: "stat", Path: name, Err: ErrBadPath}
	}
	var st unix.Stat_t
	_, err := ignoringEINTR(func() (int, error) { return 0, unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if err != nil {
		return Info{}, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return infoOf(&st), nil
}

// Walk opens the directory rel (a clean relative path; "." is d itself)
// one component at a time, never following a symlink and never going up:
// a symlink is refused with [ErrSymlink], anything else that is not a
// directory with [ErrNotDir], both inside an [*fs.PathError] naming the
// component's path. See [WalkOptions] for checks and for making missing
// directories. The caller closes the returned Dir.
func (d *Dir) Walk(rel string, o WalkOptions) (*Dir, error) {
	if rel == "." {
		fd, err := ignoringEINTR(func() (int, error) {
			return unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: ".", Err: err}
		}
		return &Dir{fd: fd}, nil
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if !validName(p) {
			return nil, &fs.PathError{Op: "open", Path: rel, Err: ErrBadPath}
		}
	}
	cur := d.fd
	closeCur := func() {
		if cur != d.fd {
			unix.Close(cur)
		}
	}
	for i, name := range parts {
		sub := strings.Join(parts[:i+1], "/")
		if o.Check != nil {
			if err := o.Check(sub); err != nil {
				closeCur()
				return nil, err
			}
		}
		fd, err := openDirAt(cur, name)
		if errors.Is(err, unix.ENOENT) && o.Create {
			fd, err = mkdirAt(cur, name, o.Perm, o.ExactPerm, o.Owner)
		}
		if err != nil {
			closeCur()
			return nil, &fs.PathError{Op: "open", Path: sub, Err: err}
		}
		closeCur()
		cur = fd
	}
	return &Dir{fd: cur}, nil
}

// WriteFileAtomic replaces the entry name (one component) in d with a new
// regular file holding data: a temporary file created in d with
// O_EXCL|O_NOFOLLOW, then renamed over name. The rename replaces a symlink
// or file planted at name rather than writing through it; a directory
// there makes it fail. On error the temporary file is removed.
func (d *Dir) WriteFileAtomic(name string, data []byte, o WriteOptions) error {
	_, err := d.WriteAtomicFrom(name, bytes.NewReader(data), -1, o)
	return err
}

// WriteAtomicFrom is [Dir.WriteFileAtomic] with the content streamed from
// r: at most max bytes (max < 0: no bound); more fails with
// [ErrTooLarge] and leaves name as it was. It returns the bytes written.
func (d *Dir) WriteAtomicFrom(name string, r io.Reader, max int64, o WriteOptions) (int64, error) {
	if !validName(name) {
		return 0, &fs.PathError{Op: "write", Path: name, Err: ErrBadPath}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	// Keep the temporary name within NAME_MAX however long name is.
	tmp := "." + name[:min(len(name), 200)] + ".gb-tmp-" + hex.EncodeToString(rnd[:])
	perm := uint32(o.Perm.Perm())
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	})
	if err != nil {
		return 0, &fs.PathError{Op: "create", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	var n int64
	err = func() error {
		src := r
		if max >= 0 {
			src = io.LimitReader(r, max+1)
		}
		var err error
		if n, err = io.Copy(f, src); err != nil {
			return err
		}
		if max >= 0 && n > max {
			return fmt.Errorf("%w (limit %d bytes)", ErrTooLarge, max)
		}
		if o.Owner != nil {
			if err := chownNew(fd, d.fd, *o.Owner); err != nil {
				return err
			}
		}
		// After the chown, which may clear mode bits.
		if o.ExactPerm {
			if err := unix.Fchmod(fd, perm); err != nil {
				return err
			}
		}
		if o.Sync {
			return f.Sync()
		}
		return nil
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.fd, tmp, d.fd, name)
	}
	if err != nil {
		unix.Unlinkat(d.fd, tmp, 0)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return n, nil
}

// validName: one component, not "." or "..".
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/') && !strings.ContainsRune(name, 0)
}

func ignoringEINTR[T any](fn func() (T, error)) (T, error) {
	for {
		v, err := fn()
		if err != unix.EINTR {
			return v, err
		}
	}
}

// openDirAt opens the directory name in dirfd without following a
// symlink and without blocking on a FIFO or device.
func openDirAt(dirfd int, name string) (int, error) {
	fd, err := ignoringEINTR(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ELOOP):
		return -1, ErrSymlink
	case errors.Is(err, unix.ENOTDIR):
		// Linux says ENOTDIR for a symlink opened O_NOFOLLOW|O_DIRECTORY:
		// look again at what is there now.
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFLNK:
				return -1, ErrSymlink
			case unix.S_IFDIR: // swapped back since the open
				return -1, ErrChanged
			}
		}
		return -1, ErrNotDir
	default:
		return -1, err
	}
}

// mkdirAt makes the directory name in dirfd and opens it (an EEXIST from
// a concurrent mkdir just opens what is there). With owner set, a
// directory this call made is given to it; with exact, it gets perm
// whatever the umask.
func mkdirAt(dirfd int, name string, perm fs.FileMode, exact bool, owner *Owner) (int, error) {
	_, err := ignoringEINTR(func() (int, error) { return 0, unix.Mkdirat(dirfd, name, uint32(perm.Perm())) })
	made := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	if testHookAfterMkdir != nil {
		testHookAfterMkdir(name)
	}
	fd, err := openDirAt(dirfd, name)
	if err != nil || !made || (owner == nil && !exact) {
		return fd, err
	}
	// Between mkdirat and openat the sandbox may have renamed another
	// directory over this one (a directory it may not write, such as a
	// root-owned one): chown only one that looks like the directory just
	// made, ours and empty. (Ours cannot have been filled meanwhile: only
	// we can write it yet.)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	empty, err := isEmptyDir(fd)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	if int(st.Uid) == os.Geteuid() && empty {
		if owner != nil {
			if err := chownNew(fd, dirfd, *owner); err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
		// Keeping the setgid bit a setgid parent gave it.
		if exact {
			if err := unix.Fchmod(fd, uint32(perm.Perm())|uint32(st.Mode)&unix.S_ISGID); err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
	}
	return fd, nil
}

// testHookAfterMkdir, set by tests only, runs between the mkdirat and the
// openat of a directory a walk makes.
var testHookAfterMkdir func(name string)

// isEmptyDir reports whether the directory fd (just opened: its offset at
// the start) holds nothing but "." and "..".
func isEmptyDir(fd int) (bool, error) {
	buf := make([]byte, 4096)
	for {
		n, err := ignoringEINTR(func() (int, error) { return unix.ReadDirent(fd, buf) })
		if err != nil {
			return false, err
		}
		if n <= 0 {
			return true, nil
		}
		_, _, names := unix.ParseDirent(buf[:n], 1, nil)
		if len(names) > 0 { // ParseDirent leaves out . and ..
			return false, nil
		}
	}
}

// chownNew gives the new entry fd, made in the directory parent, to
// owner, keeping the group the kernel gave it when parent is setgid.
func chownNew(fd, parent int, owner Owner) error {
	gid := owner.GID
	var st unix.Stat_t
	if err := unix.Fstat(parent, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_ISGID != 0 {
		gid = -1
	}
	return unix.Fchown(fd, owner.UID, gid)
}

func infoOf(st *unix.Stat_t) Info {
	return Info{
		Mode:  fileMode(uint32(st.Mode)),
		UID:   int(st.Uid),
		GID:   int(st.Gid),
		Nlink: uint64(st.Nlink),
		Size:  int64(st.Size),
		Dev:   uint64(st.Dev),
		Ino:   uint64(st.Ino),
	}
}

// fileMode converts a stat mode to an fs.FileMode, as os.Lstat does.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
