package mailbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is where sessions go when Config.Dir is empty: a memory-backed
// directory when there is one — $XDG_RUNTIME_DIR, else /dev/shm — since a
// call creates about eight directory entries and disk-backed /tmp can cost
// milliseconds per entry on a busy machine; else os.TempDir(). A candidate
// is used only when it is a writable directory on tmpfs.
func DefaultDir() string {
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		if d != "" && isWritableTmpfs(d) {
			return d
		}
	}
	return os.TempDir()
}

func isWritableTmpfs(dir string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || !isTmpfs(&fs) {
		return false
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}

// DefaultParent is where sessions go when bridge.Config.Dir is empty, for
// the library and the CLI alike: a directory private to this user,
// DefaultDir()/gatebridge-<euid> (mode 0711: others may neither list nor
// create in it; a sandbox running as another uid can traverse it to the
// session it was given). bridge.Open creates it, or refuses one that is not a
// real directory owned by us with no group or other write bit: a parent
// planted by another user would let them see or swap sessions.
func DefaultParent() string {
	return filepath.Join(DefaultDir(), fmt.Sprintf("gatebridge-%d", os.Geteuid()))
}

// EnsurePrivateParent creates dir (0711) if missing and checks it is a
// real directory owned by us that no one else can write (see
// [DefaultParent]).
func EnsurePrivateParent(dir string) error {
	if err := EnsureOwnedDir(dir, 0o711); err != nil {
		return fmt.Errorf("mailbox: session parent: %w; remove it or set bridge.session_dir", err)
	}
	return nil
}

// EnsureOwnedDir creates dir with perm if missing and checks that it is a
// real directory (not a link), owned by us, that neither group nor others
// can write: one that someone else made or can change is refused.
func EnsureOwnedDir(dir string, perm os.FileMode) error {
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (a symlink or file planted there?)", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not us (%d): another user may have planted it", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}

// Lease is the host's hold on a session directory: an exclusive flock on
// <root>.lock, held while the session lives. [Prune] removes the sessions
// whose lease is free (their gatebridge died without cleaning up).
type Lease struct {
	root string
	fd   int
}

// Create makes a new session under parent — parent/gb-<128 random bits,
// hex> with bin/, calls/, responses/ and tmp/, all 0700 — and takes its
// lease. The name cannot be guessed, so even a parent others can traverse
// does not lead them to a session. Before the directory it creates
// parent/gb-<hex>.lock and locks it.
func Create(parent string) (Layout, *Lease, error) {
	root, fd, err := mkSessionDir(parent)
	if err != nil {
		return Layout{}, nil, fmt.Errorf("mailbox: create session dir: %w", err)
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	l := LayoutAt(root)
	lease := &Lease{root: root, fd: fd}
	// 0700 everywhere: no other host user may list, read or write a
	// session. A command running as another uid is let in by an explicit
	// grant (sandbox.GrantSession).
	for _, d := range []string{l.Bin, l.Calls, l.Responses, l.Tmp} {
		err := os.Mkdir(d, 0o700)
		if err == nil {
			err = os.Chmod(d, 0o700) // umask
		}
		if err != nil {
			RemoveTree(root)
			lease.Release(false)
			return Layout{}, nil, fmt.Errorf("mailbox: create session dir: %w", err)
		}
	}
	return l, lease, nil
}

// Release ends the lease. A kept session's lock file becomes <root>.kept,
// which Prune respects; otherwise the lock file is removed.
func (l *Lease) Release(keep bool) {
	if l == nil || l.fd < 0 {
		return
	}
	lock := l.root + LockSuffix
	if keep {
		os.Rename(lock, l.root+KeptSuffix)
	} else {
		os.Remove(lock)
	}
	unix.Close(l.fd)
	l.fd = -1
}

func mkSessionDir(parent string) (root string, lockFd int, err error) {
	for range 5 {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", -1, err
		}
		root := filepath.Join(parent, SessionPrefix+hex.EncodeToString(b[:]))
		fd, err := unix.Open(root+LockSuffix, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", -1, err
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			os.Remove(root + LockSuffix)
			return "", -1, fmt.Errorf("lock %s: %w", root+LockSuffix, err)
		}
		err = os.Mkdir(root, 0o700)
		if err == nil {
			err = os.Chmod(root, 0o700) // umask
		}
		if err != nil {
			os.Remove(root + LockSuffix)
			unix.Close(fd)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return "", -1, err
		}
		return root, fd, nil
	}
	return "", -1, errors.New("could not pick a new session name")
}

// Prune removes from dir the sessions whose owner is gone: a gb-<hex>
// session whose lock file is not locked (its gatebridge was killed, or
// the machine lost power), one with no lock file that is older than a
// minute, and lock files left without a session. Directories the sandbox
// made unreadable are removed too; nothing is followed. Sessions of other
// users whose lock file we cannot open are left alone. It returns the
// paths removed; a session it could not remove is a [*PruneError] in err
// (several joined with errors.Join), and stays for the next try. It takes
// at most [RemoveMaxTime] (see [PruneWithin]). bridge.Open prunes its
// parent once per process.
func Prune(dir string) (removed []string, err error) { return PruneWithin(dir, RemoveMaxTime) }

// PruneError is an abandoned session [Prune] could not remove.
type PruneError struct {
	Path string
	Err  error
}

func (e *PruneError) Error() string { return "remove " + e.Path + ": " + e.Err.Error() }
func (e *PruneError) Unwrap() error { return e.Err }

// PruneWithin is [Prune] giving up after d: the sessions it did not get
// to, or not to the end of, stay for the next prune (a [*PruneError] says
// which).
func PruneWithin(dir string, d time.Duration) (removed []string, err error) {
	until := time.Now().Add(d)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		base, isLock := strings.CutSuffix(name, LockSuffix)
		if !strings.HasPrefix(base, SessionPrefix) || len(base) != len(SessionPrefix)+32 {
			continue
		}
		root := filepath.Join(dir, base)
		if _, err := os.Lstat(root + KeptSuffix); err == nil {
			continue
		}
		if isLock {
			if _, err := os.Lstat(root); err == nil {
				continue // handled with its session
			}
		} else if e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
			continue
		}
		fd, err := unix.Open(root+LockSuffix, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			fi, serr := os.Lstat(root)
			if serr != nil || time.Since(fi.ModTime()) < time.Minute {
				continue // being created, or already gone
			}
		case err != nil:
			continue // another user's, or not a file we may touch
		default:
			if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
				unix.Close(fd)
				continue // its owner is alive
			}
		}
		rerr := RemoveTreeWithin(root, time.Until(until))
		if rerr == nil {
			os.Remove(root + LockSuffix)
			removed = append(removed, root)
		} else {
			errs = append(errs, &PruneError{root, rerr})
		}
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	return removed, errors.Join(errs...)
}
