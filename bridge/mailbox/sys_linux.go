//go:build linux

package mailbox

import "golang.org/x/sys/unix"

// mkfifoAt makes a FIFO named name under dirFd: 0660, so that under a
// default ACL (a prepared slot) the mask lets the sandbox uid open it;
// without one it is owned by the call directory's owner (see makeWakeAt).
func mkfifoAt(dirFd int, name string) error {
	return unix.Mknodat(dirFd, name, unix.S_IFIFO|0o660, 0)
}

// isTmpfs reports whether fs is a tmpfs.
func isTmpfs(fs *unix.Statfs_t) bool { return fs.Type == unix.TMPFS_MAGIC }

// chmodDirAt gives the directory name under dirfd mode 0700 without
// following a symlink: opened O_PATH|O_NOFOLLOW, chmodded through
// /proc/self/fd.
func chmodDirAt(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Chmod("/proc/self/fd/"+itoa(fd), 0o700)
}

// slotsSupported: the host can prepare call slots (see [Box.MakeSlot]).
const slotsSupported = true

// copyDefaultACL gives the directory toFd the default ACL of fromFd, as
// both its access and its default ACL: what it would have had if it had
// been made in fromFd. It reports whether fromFd had one.
func copyDefaultACL(fromFd, toFd int) (bool, error) {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(fromFd, "system.posix_acl_default", buf)
	if err != nil {
		if err == unix.ENODATA || err == unix.EOPNOTSUPP {
			return false, nil
		}
		return false, err
	}
	acl := buf[:n]
	if err := unix.Fsetxattr(toFd, "system.posix_acl_access", acl, 0); err != nil {
		return true, err
	}
	return true, unix.Fsetxattr(toFd, "system.posix_acl_default", acl, 0)
}

// renameNoReplace moves old under oldDir to new under newDir, failing with
// EEXIST rather than replacing anything there.
func renameNoReplace(oldDir int, old string, newDir int, new string) error {
	return unix.Renameat2(oldDir, old, newDir, new, unix.RENAME_NOREPLACE)
}

func punchHole(fd int, n int64) error {
	return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, n)
}
