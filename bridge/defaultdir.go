package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

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
	if err := unix.Statfs(dir, &fs); err != nil || !isTmpfs(&fs) {
		return false
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}

// DefaultSessionParent is where sessions go when Config.Dir is empty, for
// the library and the CLI alike: a directory private to this user,
// DefaultDir()/gatebridge-<euid> (mode 0711: others may neither list nor
// create in it; a sandbox running as another uid can traverse it to the
// session it was given). Open creates it, or refuses one that is not a
// real directory owned by us with no group or other write bit: a parent
// planted by another user would let them see or swap sessions.
func DefaultSessionParent() string {
	return filepath.Join(DefaultDir(), fmt.Sprintf("gatebridge-%d", os.Geteuid()))
}

// EnsurePrivateParent creates dir (0711) if missing and checks it is a
// real directory owned by us that no one else can write (see
// [DefaultSessionParent]).
func EnsurePrivateParent(dir string) error {
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("bridge: create session parent: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("bridge: session parent: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("bridge: session parent %s is not a directory (a symlink or file planted there?); remove it", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("bridge: session parent %s is owned by uid %d, not us (%d): another user may have planted it; remove it or set bridge.session_dir", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("bridge: session parent %s is writable by group or others (mode %v); remove it or chmod 0711", dir, fi.Mode().Perm())
	}
	return nil
}
