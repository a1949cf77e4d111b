//go:build unix

package docker

import (
	"errors"
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
