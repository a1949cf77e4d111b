//go:build linux

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The reaper kills what a local command leaves running when gatebridge
// itself dies without cleaning up (kill -9, the OOM killer). The kernel's
// parent-death signal reaches only the process gatebridge started, not the
// processes that one starts. So one small sh per gatebridge process, in
// its own process group, waits on a pipe that only gatebridge holds
// (close-on-exec: no command inherits it). When the pipe ends — gatebridge
// is gone —, the sh reads the process groups of the commands still
// running from a list gatebridge keeps in memory shared with it (a memfd,
// its fd 3) and sends SIGKILL to each.
//
// The list has one fixed-width line per slot: a group id while its
// command runs, blanks after. Listing and unlisting a group are one
// pwrite each into that file: no message to the reaper, no process woken
// per command. A reaper that was killed is replaced at the next command,
// and the new one reads the same list, so the groups listed before it
// started are covered too.
//
// Left to chance: a process forked by the command in the microseconds
// between its start and its listing, if gatebridge dies right then; and
// the commands that run while no reaper does (someone killed it, and no
// command has started since).
const reaperScript = `trap '' INT TERM HUP QUIT PIPE
read -r l
exec <&3 3<&-
while read -r p; do
	case $p in ''|*[!0-9]*|0|1) ;; *) kill -KILL -"$p" 2>/dev/null ;; esac
done`

const reaperShell = "/bin/sh"

// reaperSlot is the width of one line of the list: ten characters (a
// right-aligned group id, or blanks) and a newline.
const reaperSlot = 11

var reaperBlank = []byte("          \n")

var reaper struct {
	mu      sync.Mutex
	list    *os.File // the shared list (nil: not made yet)
	slots   int      // lines in list
	free    []int    // blank lines to reuse
	w       *os.File // the pipe to the running reaper; nil: none runs
	running *exec.Cmd
}

// reapGroup lists process group pgid with the reaper (starting it when
// none runs) and returns the function that takes it off the list, to call
// once the group is gone. Without a usable /bin/sh or memfd it does
// nothing: the command still dies with gatebridge (parent-death signal),
// its descendants may not.
func reapGroup(pgid int) (done func()) {
	if pgid <= 1 { // never list 0 or 1: kill -KILL -1 kills everything
		return func() {}
	}
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.w == nil {
		if err := startReaper(); err != nil {
			return func() {}
		}
	}
	var slot int
	if n := len(reaper.free); n > 0 {
		slot, reaper.free = reaper.free[n-1], reaper.free[:n-1]
	} else {
		slot = reaper.slots
		reaper.slots++
	}
	off := int64(slot) * reaperSlot
	if _, err := reaper.list.WriteAt(fmt.Appendf(nil, "%10d\n", pgid), off); err != nil {
		reaper.free = append(reaper.free, slot)
		return func() {}
	}
	return func() {
		reaper.mu.Lock()
		defer reaper.mu.Unlock()
		if _, err := reaper.list.WriteAt(reaperBlank, off); err == nil {
			reaper.free = append(reaper.free, slot)
		} // else: never reuse the slot; a stale listed group is the lesser harm
	}
}

// startReaper starts the reaper; reaper.mu is held.
func startReaper() error {
	if reaper.list == nil {
		fd, err := unix.MemfdCreate("gatebridge-reaper", unix.MFD_CLOEXEC)
		if err != nil {
			return err
		}
		reaper.list = os.NewFile(uintptr(fd), "gatebridge-reaper")
	}
	r, w, err := os.Pipe() // close-on-exec, as every fd Go opens
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(reaperShell, "-c", reaperScript)
	cmd.Stdin = r
	// fd 3. Its offset is shared, and stays at 0: gatebridge only writes
	// at offsets (pwrite), and a reaper reads only once gatebridge is gone.
	cmd.ExtraFiles = []*os.File{reaper.list}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	// Its own group: a signal to gatebridge's group (Ctrl-C) leaves it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	reaper.w, reaper.running = w, cmd
	go func() {
		cmd.Wait() // reap it when it ends; the next command starts another
		reaper.mu.Lock()
		defer reaper.mu.Unlock()
		if reaper.running == cmd {
			reaper.w.Close()
			reaper.w, reaper.running = nil, nil
		}
	}()
	return nil
}
