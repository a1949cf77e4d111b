//go:build unix && !linux

package hostilefs

import "golang.org/x/sys/unix"

// No mknodat/mkfifoat in x/sys for every Unix: no FIFOs made fd-relative
// (the mailbox's wrappers make their own).
func mkfifoAt(int, string) error { return unix.ENOTSUP }

const canMkfifoAt = false

// isTmpfs: sessions go to the temp dir outside Linux.
func isTmpfs(*unix.Statfs_t) bool { return false }

func chmodDirAt(dirfd int, name string) error {
	return unix.Fchmodat(dirfd, name, 0o700, unix.AT_SYMLINK_NOFOLLOW)
}

func copyDefaultACL(int, int) (bool, error) { return false, unix.ENOTSUP }

func renameNoReplace(int, string, int, string) error { return unix.ENOTSUP }

func punchHole(int, int64) error { return unix.ENOTSUP }
