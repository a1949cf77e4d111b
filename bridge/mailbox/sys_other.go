//go:build !linux

package mailbox

import "golang.org/x/sys/unix"

// mkfifoAt is not available here (no mknodat/mkfifoat in x/sys for every
// Unix): the host does not pre-create wake FIFOs and the wrapper makes its
// own (see makeWakeAt).
func mkfifoAt(int, string) error { return unix.ENOTSUP }

// isTmpfs: the default session dir is the temp dir outside Linux.
func isTmpfs(*unix.Statfs_t) bool { return false }

// chmodDirAt gives the directory name under dirfd mode 0700 without
// following a symlink.
func chmodDirAt(dirfd int, name string) error {
	return unix.Fchmodat(dirfd, name, 0o700, unix.AT_SYMLINK_NOFOLLOW)
}

// slotsSupported: no mkfifoat here, so no prepared call slots; wrappers
// make their own call directories.
const slotsSupported = false

func copyDefaultACL(int, int) (bool, error) { return false, unix.ENOTSUP }

func renameNoReplace(int, string, int, string) error { return unix.ENOTSUP }

func punchHole(int, int64) error { return unix.ENOTSUP }
