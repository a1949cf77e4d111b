package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// POSIX ACLs as Linux stores them in the system.posix_acl_access and
// system.posix_acl_default extended attributes (posix_acl_xattr.h): a
// little-endian u32 version (2), then one {u16 tag, u16 perm, u32 id}
// entry per line, sorted by tag and then id.
const (
	aclVersion  = 2
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff

	xattrACLAccess  = "system.posix_acl_access"
	xattrACLDefault = "system.posix_acl_default"
)

// errNoACL means the filesystem cannot store POSIX ACLs.
var errNoACL = errors.New("filesystem without POSIX ACLs")

// userACL is an ACL giving the owner rwx, uid perm, and nobody else
// anything (group and other empty; the mask is perm).
func userACL(uid int, perm uint16) []byte {
	type ent struct {
		tag, perm uint16
		id        uint32
	}
	ents := []ent{
		{aclUserObj, 7, aclNoID},
		{aclUser, perm, uint32(uid)},
		{aclGroupObj, 0, aclNoID},
		{aclMask, perm, aclNoID},
		{aclOther, 0, aclNoID},
	}
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range ents {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// grantACL gives uid, and no one else, what the command needs in a
// private session: traverse the root, read bin/ and responses/ (and, by a
// default ACL, every response the host writes there later), read and write
// calls/ and tmp/. Ownership and the 0700 modes stay; group and other get
// nothing. Directories are opened without following links.
func grantACL(d SessionDirs, uid int) error {
	const r, w, x = 4, 2, 1
	for _, e := range []struct {
		path        string
		access, def uint16 // def 0: no default ACL
	}{
		{d.Calls, r | w | x, r | w | x},
		{d.Tmp, r | w | x, r | w | x},
		{d.Bin, r | x, 0},
		{d.Responses, r | x, r},
		{d.Root, x, 0},
	} {
		if e.path == "" {
			continue
		}
		fd, err := unix.Open(e.path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", e.path, err)
		}
		err = unix.Fsetxattr(fd, xattrACLAccess, userACL(uid, e.access), 0)
		if err == nil && e.def != 0 {
			err = unix.Fsetxattr(fd, xattrACLDefault, userACL(uid, e.def), 0)
		}
		unix.Close(fd)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) {
			return errNoACL
		}
		if err != nil {
			return fmt.Errorf("set ACL on %s: %w", e.path, err)
		}
	}
	return nil
}
