// Package auditlog is gatebridge's audit log: JSON lines appended to a
// file that rotates at a size, shared safely by several processes.
package auditlog

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Log appends JSON lines to the audit file, capped at maxBytes: past
// it the file is rotated to path.1 (path.1 to path.2, …, keeping maxFiles
// old files). The file is opened without following a symlink and must be a
// regular file; several gatebridge processes may share it (an flock guards
// each write and rotation, and a process whose file was rotated away
// reopens the path).
type Log struct {
	mu       sync.Mutex
	path     string
	f        *os.File
	maxBytes int64
	maxFiles int
}

// Open opens (creating) the audit file at path.
func Open(path string, maxBytes int64, maxFiles int) (*Log, error) {
	a := &Log{path: path, maxBytes: maxBytes, maxFiles: maxFiles}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Log) open() error {
	fd, err := unix.Open(a.path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		switch err {
		case unix.ELOOP:
			return fmt.Errorf("%s is a symbolic link (refused)", a.path)
		case unix.ENXIO:
			return fmt.Errorf("%s is not a regular file (a FIFO or socket)", a.path)
		}
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return fmt.Errorf("%s is not a regular file", a.path)
	}
	a.f = os.NewFile(uintptr(fd), a.path)
	return nil
}

// Write appends one record (a whole line). Under the file's lock it
// checks that the file is still the one at the path (another process may
// have rotated it) and that the record fits; otherwise it rotates or
// reopens and checks again, so no file grows past maxBytes.
func (a *Log) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if a.f == nil {
			if err := a.open(); err != nil {
				return 0, err
			}
		}
		fd := int(a.f.Fd())
		unix.Flock(fd, unix.LOCK_EX)
		var cur, onDisk unix.Stat_t
		rotated := unix.Fstat(fd, &cur) == nil && (unix.Lstat(a.path, &onDisk) != nil || onDisk.Ino != cur.Ino || onDisk.Dev != cur.Dev)
		full := !rotated && a.maxBytes > 0 && cur.Size > 0 && cur.Size+int64(len(p)) > a.maxBytes
		if full {
			a.rotate()
		}
		if rotated || full {
			unix.Flock(fd, unix.LOCK_UN)
			a.f.Close()
			a.f = nil
			continue
		}
		n, err := a.f.Write(p)
		unix.Flock(fd, unix.LOCK_UN)
		return n, err
	}
}

// rotate shifts path.N-1 → path.N … path → path.1, dropping the oldest.
func (a *Log) rotate() {
	if a.maxFiles <= 0 {
		os.Remove(a.path)
		return
	}
	os.Remove(fmt.Sprintf("%s.%d", a.path, a.maxFiles))
	for i := a.maxFiles - 1; i >= 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", a.path, i), fmt.Sprintf("%s.%d", a.path, i+1))
	}
	os.Rename(a.path, a.path+".1")
}

// Close closes the file.
func (a *Log) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	return a.f.Close()
}
