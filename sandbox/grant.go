package sandbox

import (
	"fmt"
	"os"
)

// GrantSession hands a private session (every directory 0700, owned by
// gatebridge) to the uid:gid a command runs as when that is not
// gatebridge's own (gatebridge is root): calls/ and tmp/, which the
// command writes, are chowned to uid:gid (0700); bin/ and responses/,
// which it only reads, stay owned by gatebridge with group gid and mode
// 0750, so the command can never change them even where they are mounted
// writable (a persistent sandbox); the session root becomes 0711 so it can
// be traversed but not listed. No other host user (outside group gid) can
// list, read or write anything in it. Nothing is followed: a symlink in
// place of a directory is an error.
func GrantSession(d SessionDirs, uid, gid int) error {
	if d.Root == "" || (uid == os.Geteuid() && gid == os.Getegid()) {
		return nil
	}
	fail := func(err error) error {
		return fmt.Errorf("grant session to %d:%d: %w (only root can run commands as another user)", uid, gid, err)
	}
	for _, e := range []struct {
		path     string
		uid, gid int
		mode     os.FileMode
	}{
		{d.Calls, uid, gid, 0o700},
		{d.Tmp, uid, gid, 0o700},
		{d.Bin, os.Geteuid(), gid, 0o750},
		{d.Responses, os.Geteuid(), gid, 0o750},
		{d.Root, os.Geteuid(), os.Getegid(), 0o711},
	} {
		if e.path == "" {
			continue
		}
		fi, err := os.Lstat(e.path)
		if err != nil {
			return fail(err)
		}
		if !fi.IsDir() {
			return fail(fmt.Errorf("%s is not a directory", e.path))
		}
		if err := os.Lchown(e.path, e.uid, e.gid); err != nil {
			return fail(err)
		}
		if err := os.Chmod(e.path, e.mode); err != nil {
			return fail(err)
		}
	}
	return nil
}
