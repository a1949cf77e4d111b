package sandbox

import (
	"errors"
	"fmt"
	"os"
)

// GrantSession hands a private session (every directory 0700, owned by
// gatebridge) to the uid a command runs as when that is not gatebridge's
// own (gatebridge is root). Where the filesystem has POSIX ACLs (tmpfs,
// ext4, xfs, btrfs) it adds one ACL entry for uid and changes nothing
// else: uid may traverse the root, read bin/ and responses/ (and every
// response written there later, by a default ACL), and read and write
// calls/ and tmp/; no group and no other user gets anything, and the
// command can never change bin/ or responses/. It is idempotent. Without
// ACLs it falls back to ownership: calls/ and tmp/, which the command
// writes, are chowned to uid:gid (0700); bin/ and responses/, which it
// only reads, stay owned by gatebridge with group gid and mode 2750 (setgid,
// so the responses written there later are group gid's too); the
// session root becomes 0711 so it can be traversed but not listed. Then
// members of group gid can read bin/ and responses/ too. Nothing is
// followed: a symlink in place of a directory is an error.
func GrantSession(d SessionDirs, uid, gid int) error {
	if d.Root == "" || (uid == os.Geteuid() && gid == os.Getegid()) {
		return nil
	}
	fail := func(err error) error {
		return fmt.Errorf("grant session to %d:%d: %w (only root can run commands as another user)", uid, gid, err)
	}
	if err := grantACL(d, uid); !errors.Is(err, errNoACL) {
		if err != nil {
			return fail(err)
		}
		return nil
	}
	return grantOwners(d, uid, gid, fail)
}

// GrantSessionOwners hands the session to uid:gid by ownership alone, as
// [GrantSession] does where the filesystem has no ACLs: for a sandbox
// that checks permissions itself and ignores ACLs (gVisor). Members of
// group gid can then read bin/ and responses/ too.
func GrantSessionOwners(d SessionDirs, uid, gid int) error {
	if d.Root == "" || (uid == os.Geteuid() && gid == os.Getegid()) {
		return nil
	}
	return grantOwners(d, uid, gid, func(err error) error {
		return fmt.Errorf("grant session to %d:%d: %w (only root can run commands as another user)", uid, gid, err)
	})
}

func grantOwners(d SessionDirs, uid, gid int, fail func(error) error) error {
	for _, e := range []struct {
		path     string
		uid, gid int
		mode     os.FileMode
	}{
		{d.Calls, uid, gid, 0o700},
		{d.Tmp, uid, gid, 0o700},
		// setgid: what the host writes in them later (0640 responses)
		// gets group gid, not gatebridge's own group.
		{d.Bin, os.Geteuid(), gid, 0o750 | os.ModeSetgid},
		{d.Responses, os.Geteuid(), gid, 0o750 | os.ModeSetgid},
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
