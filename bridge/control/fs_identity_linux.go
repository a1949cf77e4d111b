package control

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// identityChecks: as root, the file API acts as the workspace's owner
// (asIdentity), here.
const identityChecks = true

// asIdentity runs fn on an OS thread of its own whose filesystem identity
// is id (setfsuid, setfsgid, and id.GID as its only supplementary group):
// the kernel then checks what fn opens, makes, renames and removes as it
// does for the sandbox's commands, which run as id, and the capabilities
// that would override those checks (CAP_DAC_OVERRIDE, CAP_FOWNER, ...)
// leave the thread's effective set with the fsuid. The thread is never
// reused: the goroutine ends locked to it, and the runtime ends the
// thread with it.
func asIdentity(id hostilefs.Owner, fn func() error) error {
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
