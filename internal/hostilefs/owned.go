//go:build unix

package hostilefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnsureOwnedDir creates dir with perm if missing and checks that it is a
// real directory (not a link), owned by us, that neither group nor others
// can write: one that someone else made or can change is refused.
func EnsureOwnedDir(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (a symlink or file planted there?)", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not us (%d): another user may have planted it", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}

// MkdirOpenAt makes the directory name (one component) under dirfd and
// opens it, in a directory the sandbox may write as the host is writing
// it: the new directory gets exactly perm (whatever the umask) through
// the fd, never by name. Anything already at name fails with EEXIST (a
// [*FileError]); a link or other entry swapped in between the mkdir and
// the open is refused (it is not followed), and so is a directory that
// is not ours or not empty (another one renamed over it). The caller
// closes the fd, and goes on relative to it.
func MkdirOpenAt(dirfd int, name string, perm os.FileMode) (int, error) {
	if !validName(name) {
		return -1, &FileError{name, ErrBadPath}
	}
	_, err := ignoringEINTR(func() (int, error) { return 0, unix.Mkdirat(dirfd, name, uint32(perm.Perm())) })
	if err != nil {
		return -1, &FileError{name, err}
	}
	if testHookAfterMkdir != nil {
		testHookAfterMkdir(name)
	}
	fd, err := OpenDirAt(dirfd, name)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	empty := false
	if err == nil {
		empty, err = isEmptyDir(fd)
	}
	switch {
	case err != nil:
		err = &FileError{name, err}
	case int(st.Uid) != os.Geteuid() || !empty:
		err = &FileError{name, errReplaced}
	default:
		if err = unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
			err = &FileError{name, err}
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// errReplaced: what MkdirOpenAt opened is not the directory it made.
var errReplaced = errors.New("was replaced while it was made (refused)")
