//go:build unix

package approval

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

const fixHint = "the grants file must be a regular file of yours, mode 0600, in a directory only you can write (chmod 600 FILE; chmod 700 DIR); gatebridge grants writes it so"

func statFile(path string) (stamp, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stamp{missing: true, haveStamps: true}, nil
		}
		return stamp{}, fmt.Errorf("approval: grants file %s: %w", path, err)
	}
	s := stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), haveStamps: true}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return s, nil
}

// readFile reads the grants at path: a missing file holds none; a link,
// or a file another user could have written or may read, is refused.
func readFile(path string) ([]Grant, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("approval: grants file: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, hint.With(fmt.Errorf("approval: grants file %s is a symbolic link (refused: it may point anywhere)", path), fixHint)
	}
	data, _, err := hostilefs.ReadTrusted(path, hostilefs.Trust{MaxBytes: maxFileBytes, Forbid: 0o077, Path: true})
	if err != nil {
		return nil, hint.With(fmt.Errorf("approval: grants file refused: %w", err), fixHint)
	}
	return parse(path, data)
}

// ensureDir makes dir (0700) if missing and checks it is a directory of
// ours that no one else can write.
func ensureDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("approval: grants directory: %w", err)
	}
	if err := hostilefs.EnsureOwnedDir(dir, 0o700); err != nil {
		return hint.With(fmt.Errorf("approval: grants directory: %w", err), fixHint)
	}
	return nil
}

// lockDir takes an exclusive flock on dir (several processes may edit
// the file at once).
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("approval: grants directory: %w", err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("approval: lock %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// writeAtomic writes data to a new 0600 file in path's directory and
// renames it over path: a reader sees the old file or the new one.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".grants-*.tmp")
	if err != nil {
		return fmt.Errorf("approval: write grants: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("approval: write grants: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("approval: write grants: %w", err)
	}
	return nil
}
