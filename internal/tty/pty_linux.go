package tty

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a new pseudo-terminal through /dev/ptmx: master is the
// side a terminal emulator (or gatebridge, running a command on a
// terminal) holds, slave the terminal a program uses. Neither becomes
// this process's controlling terminal (O_NOCTTY). The master stays in
// the runtime's poller (its ioctls go through SyscallConn, not Fd, which
// would make it blocking and deaf to read deadlines).
func OpenPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var n int
	rc, err := master.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
				n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err == nil {
		slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
