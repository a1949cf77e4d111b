//go:build unix

package gates

import (
	"io/fs"
	"syscall"
)

// Open flags: never block opening a FIFO or device, and refuse a non-directory
// where a directory is wanted.
const (
	oNonblock  = syscall.O_NONBLOCK
	oDirectory = syscall.O_DIRECTORY
)

// fileID returns the device and inode of fi (from os.Stat or Lstat).
func fileID(fi fs.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}

// fileOwner returns the owner and group of fi (from os.Stat or Lstat).
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
