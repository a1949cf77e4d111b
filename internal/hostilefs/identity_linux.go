package hostilefs

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// CanActAsOwner: [AsOwner] changes the identity of the thread it runs fn
// on, here (Linux: per-thread setfsuid/setfsgid).
const CanActAsOwner = true

// ActAs returns the identity a root process acts as on a tree owned by
// uid:gid ([AsOwner]): that owner when this process is root and the owner
// is someone else, nil (act as this process) otherwise, and always nil
// where [CanActAsOwner] is false.
func ActAs(uid, gid int) *Owner {
	if os.Geteuid() != 0 || uid == 0 {
		return nil
	}
	return &Owner{UID: uid, GID: gid}
}

// AsOwner runs fn on an OS thread of its own whose filesystem identity
// is id (setfsuid, setfsgid, and id.GID as its only supplementary group):
// the kernel then checks what fn opens, makes, renames and removes as it
// does for the sandbox's commands, which run as id, and the capabilities
// that would override those checks (CAP_DAC_OVERRIDE, CAP_FOWNER, ...)
// leave the thread's effective set with the fsuid. The thread is never
// reused: the goroutine ends locked to it, and the runtime ends the
// thread with it. Only fn's own syscalls carry the identity: fn must not
// hand file system work to other goroutines.
func AsOwner(id Owner, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- func() error {
			// Raw syscalls: they change this thread only.
			if err := unix.Setgroups([]int{id.GID}); err != nil {
				return fmt.Errorf("act as the workspace's owner: setgroups: %w", err)
			}
			unix.Setfsgid(id.GID)
			unix.Setfsuid(id.UID)
			if uid, _ := unix.SetfsuidRetUid(-1); uid != id.UID {
				return fmt.Errorf("act as the workspace's owner: the fsuid is %d, not %d", uid, id.UID)
			}
			if gid, _ := unix.SetfsgidRetGid(-1); gid != id.GID {
				return fmt.Errorf("act as the workspace's owner: the fsgid is %d, not %d", gid, id.GID)
			}
			return fn()
		}()
	}()
	return <-errc
}
