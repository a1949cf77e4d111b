//go:build unix

package gates

import "syscall"

// Open flags: never block opening a FIFO or device, and refuse a non-directory
// where a directory is wanted.
const (
	oNonblock  = syscall.O_NONBLOCK
	oDirectory = syscall.O_DIRECTORY
)
