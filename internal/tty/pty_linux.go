package tty

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a new pseudo-terminal through /dev/ptmx: master is the
// side a terminal emulator holds, slave the terminal a program writes
// to. Tests use it to see what gatebridge prints for a person.
func OpenPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err = unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err == nil {
		var n int
		if n, err = unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN); err == nil {
			slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
