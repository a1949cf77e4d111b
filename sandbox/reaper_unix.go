//go:build unix

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// The reaper kills what a local command leaves running when gatebridge
// itself dies without cleaning up (kill -9, the OOM killer). The kernel's
// parent-death signal reaches only the process gatebridge started, not the
// processes that one starts; so one small sh per gatebridge process, in
// its own process group, reads "+PGID" and "-PGID" lines on a pipe that
// only gatebridge holds (close-on-exec: no command inherits it) and, when
// the pipe ends — gatebridge is gone —, sends SIGKILL to every group still
// listed. A run costs two short writes instead of a supervisor process
// per command.
//
// Left to chance: a process forked by the command in the microseconds
// between its start and its registration, if gatebridge dies right then;
// and the reaper itself, if someone kills it first (the next command
// starts a new one).
const reaperScript = `trap '' INT TERM HUP QUIT PIPE
g=' '
while IFS= read -r l; do
	case $l in
	+*) g="$g${l#+} " ;;
	-*) p=${l#-}; case $g in *" $p "*) g="${g%%" $p "*} ${g#*" $p "}" ;; esac ;;
	esac
done
for p in $g; do kill -KILL -"$p" 2>/dev/null; done`

const reaperShell = "/bin/sh"

var reaper struct {
	mu  sync.Mutex
	w   *os.File // nil: not running
	pid int
}

// reapGroup lists process group pgid with the reaper (starting it when
// none runs) and returns the function that takes it off the list, to call
// once the group is gone. Without a usable /bin/sh it does nothing: the
// command still dies with gatebridge (parent-death signal), its
// descendants may not.
func reapGroup(pgid int) (done func()) {
	if reaperSend(fmt.Sprintf("+%d\n", pgid)) != nil {
		return func() {}
	}
	return func() { reaperSend(fmt.Sprintf("-%d\n", pgid)) }
}

func reaperSend(line string) error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	for attempt := 0; attempt < 2; attempt++ {
		if reaper.w == nil {
			if err := startReaper(); err != nil {
				return err
			}
		}
		if _, err := reaper.w.WriteString(line); err == nil {
			return nil
		}
		// The reaper is gone (killed): start another.
		reaper.w.Close()
		reaper.w = nil
	}
	return fmt.Errorf("reaper unavailable")
}

// startReaper starts the reaper; reaper.mu is held.
func startReaper() error {
	r, w, err := os.Pipe() // close-on-exec, as every fd Go opens
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(reaperShell, "-c", reaperScript)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	// Its own group: a signal to gatebridge's group (Ctrl-C) leaves it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	go cmd.Wait() // reap it when it ends
	reaper.w, reaper.pid = w, cmd.Process.Pid
	return nil
}
