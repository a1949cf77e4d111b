//go:build unix

package docker

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// pidAlive reports whether process pid exists on this host.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// procStart is the start time of pid (field 22 of /proc/PID/stat, in clock
// ticks since boot), or "" where there is no /proc: with the pid it names
// a process for good, so a reused pid is not taken for the owner.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// ownerAlive reports whether the gatebridge process pid (started at
// start, when known) still runs.
func ownerAlive(pid int, start string) bool {
	if !pidAlive(pid) {
		return false
	}
	return start == "" || procStart(pid) == "" || procStart(pid) == start
}
