package bridge

import (
	"os"

	"golang.org/x/sys/unix"
)

// DefaultDir is where sessions go when Config.Dir is empty: a memory-backed
// directory when there is one — $XDG_RUNTIME_DIR, else /dev/shm — since a
// call creates about eight directory entries and disk-backed /tmp can cost
// milliseconds per entry on a busy machine; else os.TempDir(). A candidate
// is used only when it is a writable directory on tmpfs.
func DefaultDir() string {
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		if d != "" && isWritableTmpfs(d) {
			return d
		}
	}
	return os.TempDir()
}

func isWritableTmpfs(dir string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		return false
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}
