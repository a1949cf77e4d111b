package mailbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// SlotPrefix starts the names of call slots: call directories the host
// prepares in calls/ (with their wake FIFO) so that a wrapper claims one
// by creating its argv file with an exclusive-create redirection (set -C)
// instead of running mkdir and mkfifo. A slot is a v2 call directory like
// any other once claimed; the host treats it as hostile like any other.
const SlotPrefix = "_"

// ErrSlotsUnsupported: this system cannot prepare slots (no mkfifoat).
var ErrSlotsUnsupported = errors.New("mailbox: call slots are not supported here")

// MakeSlot prepares the call slot calls/<name>: a directory the sandbox
// can write exactly as it can write calls/ (same owner, or calls/' default
// ACL), holding a wake FIFO it can open. The slot is built under
// responses/ (where the sandbox cannot write) and moved into calls/ only
// when complete, never replacing an entry there (EEXIST).
func (b *Box) MakeSlot(name string) error {
	if !slotsSupported {
		return ErrSlotsUnsupported
	}
	if !ValidID(name) {
		return errors.New("mailbox: invalid slot name")
	}
	if _, err := statAt(b.respFd, name+ExtExit); err == nil {
		return unix.EEXIST // answered before: a caller could read that answer
	}
	tmp := ".slot-" + name
	if err := unix.Mkdirat(b.respFd, tmp, 0o770); err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			budget := 4
			removeAllAt(b.respFd, tmp, &budget)
		}
	}()
	fd, err := openDirAt(b.respFd, tmp)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var calls unix.Stat_t
	if err := unix.Fstat(b.callsFd, &calls); err != nil {
		return err
	}
	acl, err := copyDefaultACL(b.callsFd, fd)
	if err != nil {
		return err
	}
	if !acl {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return err
		}
	}
	if int(calls.Uid) != unix.Geteuid() || int(calls.Gid) != unix.Getegid() {
		if err := unix.Fchown(fd, int(calls.Uid), int(calls.Gid)); err != nil {
			return err
		}
	}
	makeWakeAt(fd)
	if st, err := statAt(fd, FileWake); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return errors.New("mailbox: slot: no wake FIFO")
	}
	if err := renameNoReplace(b.respFd, tmp, b.callsFd, name); err != nil {
		return err
	}
	ok = true
	return nil
}
