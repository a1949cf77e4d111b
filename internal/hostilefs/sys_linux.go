//go:build linux

package hostilefs

import (
	"strconv"

	"golang.org/x/sys/unix"
)

func mkfifoAt(dirFd int, name string) error {
	return unix.Mknodat(dirFd, name, unix.S_IFIFO|0o660, 0)
}

const canMkfifoAt = true

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
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o700)
}

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

func renameNoReplace(oldDir int, old string, newDir int, new string) error {
	return unix.Renameat2(oldDir, old, newDir, new, unix.RENAME_NOREPLACE)
}

func punchHole(fd int, n int64) error {
	return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, n)
}
