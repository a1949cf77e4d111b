//go:build linux

package mailbox

import "golang.org/x/sys/unix"

// mkfifoAt makes a FIFO (0600) named name under dirFd.
func mkfifoAt(dirFd int, name string) error {
	return unix.Mknodat(dirFd, name, unix.S_IFIFO|0o600, 0)
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
