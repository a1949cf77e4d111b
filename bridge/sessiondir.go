package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// DefaultDir is where sessions go when Config.Dir is empty: a memory-backed
// directory when there is one — $XDG_RUNTIME_DIR, else /dev/shm — since a
// call creates about eight directory entries and disk-backed /tmp can cost
// milliseconds per entry on a busy machine; else os.TempDir(). A candidate
// is used only when it is a writable directory on tmpfs.
func DefaultDir() string {
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), "/dev/shm"} {
		if d != "" && hostilefs.WritableTmpfs(d) {
			return d
		}
	}
	return os.TempDir()
}

// DefaultParent is where sessions go when Config.Dir is empty, for the
// library and the CLI alike: a directory private to this user,
// DefaultDir()/gatebridge-<euid> (mode 0711: others may neither list nor
// create in it; a sandbox running as another uid can traverse it to the
// session it was given). [Open] creates it, or refuses one that is not a
// real directory owned by us with no group or other write bit: a parent
// planted by another user would let them see or swap sessions.
func DefaultParent() string {
	return filepath.Join(DefaultDir(), fmt.Sprintf("gatebridge-%d", os.Geteuid()))
}

// EnsurePrivateParent creates dir (0711) if missing and checks it is a
// real directory owned by us that no one else can write (see
// [DefaultParent], [hostilefs.EnsureOwnedDir]).
func EnsurePrivateParent(dir string) error {
	if err := hostilefs.EnsureOwnedDir(dir, 0o711); err != nil {
		return fmt.Errorf("mailbox: session parent: %w; remove it or set bridge.session_dir", err)
	}
	return nil
}

// lease is the host's hold on a session directory: an exclusive flock on
// <root>.lock, held while the session lives. [PruneSessions] removes the
// sessions whose lease is free (their gatebridge died without cleaning
// up).
type lease struct {
	root string
	fd   int
}

// release ends the lease. A kept session's lock file becomes <root>.kept,
// which PruneSessions respects; otherwise the lock file is removed.
func (l *lease) release(keep bool) {
	if l == nil || l.fd < 0 {
		return
	}
	lock := l.root + mailbox.LockSuffix
	if keep {
		os.Rename(lock, l.root+mailbox.KeptSuffix)
	} else {
		os.Remove(lock)
	}
	unix.Close(l.fd)
	l.fd = -1
}

// sessionDir is a session directory just made, with descriptors of its
// directories: what the host writes there at first (wrappers) and reads
// from then on (calls/, responses/) is reached through them, never by
// path, so nothing the sandbox renames or links in the parent (the
// sessions root of a persistent sandbox, which its container may write)
// redirects it.
type sessionDir struct {
	layout                      mailbox.Layout
	lease                       *lease
	root, bin, calls, responses int // fds; -1 once handed on or closed
}

// createSessionDir makes a new session under parent — parent/gb-<128
// random bits, hex> with bin/, calls/, responses/ and tmp/, all 0700 —
// and takes its lease. The name cannot be guessed, so even a parent others
// can traverse does not lead them to a session. Before the directory it
// creates parent/gb-<hex>.lock and locks it.
//
// Everything is made relative to a descriptor of parent (parent's own
// path is the host's, and followed): each directory is made with mkdirat,
// opened without following a link and checked to be the empty directory
// of ours just made, and given its mode through its fd
// ([hostilefs.MkdirOpenAt]). A link or directory a sandbox that writes
// parent swaps in meanwhile fails the creation instead of receiving the
// session.
func createSessionDir(parent string) (*sessionDir, error) {
	sd, err := makeSessionDir(parent)
	if err != nil {
		return nil, fmt.Errorf("mailbox: create session dir: %w", err)
	}
	return sd, nil
}

func makeSessionDir(parent string) (*sessionDir, error) {
	if abs, err := filepath.Abs(parent); err == nil {
		parent = abs
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: parent, Err: err}
	}
	defer unix.Close(pfd)
	for range 5 {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := mailbox.SessionPrefix + hex.EncodeToString(b[:])
		if testHookSessionName != nil {
			name = testHookSessionName(name)
		}
		root := filepath.Join(parent, name)
		lockFd, err := unix.Openat(pfd, name+mailbox.LockSuffix, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: root + mailbox.LockSuffix, Err: err}
		}
		if err := unix.Flock(lockFd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(lockFd)
			unix.Unlinkat(pfd, name+mailbox.LockSuffix, 0)
			return nil, fmt.Errorf("lock %s: %w", root+mailbox.LockSuffix, err)
		}
		l := &lease{root: root, fd: lockFd}
		rootFd, err := hostilefs.MkdirOpenAt(pfd, name, 0o700)
		if err != nil {
			unix.Unlinkat(pfd, name+mailbox.LockSuffix, 0)
			unix.Close(lockFd)
			if errors.Is(err, unix.EEXIST) {
				continue
			}
			return nil, fmt.Errorf("%s: %w", parent, err)
		}
		if testHookSessionDirMade != nil {
			testHookSessionDirMade(root)
		}
		sd := &sessionDir{layout: mailbox.LayoutAt(root), lease: l, root: rootFd, bin: -1, calls: -1, responses: -1}
		// 0700 everywhere: no other host user may list, read or write a
		// session. A command running as another uid is let in by an
		// explicit grant (sandbox.GrantSession).
		for _, d := range []struct {
			name string
			fd   *int
		}{{mailbox.DirBin, &sd.bin}, {mailbox.DirCalls, &sd.calls}, {mailbox.DirResponses, &sd.responses}, {mailbox.DirTmp, nil}} {
			fd, err := hostilefs.MkdirOpenAt(rootFd, d.name, 0o700)
			if err != nil {
				sd.close()
				hostilefs.RemoveTreeAt(pfd, name, hostilefs.RemoveMaxTime)
				l.release(false)
				return nil, fmt.Errorf("%s: %w", root, err)
			}
			if d.fd == nil {
				unix.Close(fd)
			} else {
				*d.fd = fd
			}
			if testHookSessionDirMade != nil {
				testHookSessionDirMade(filepath.Join(root, d.name))
			}
		}
		return sd, nil
	}
	return nil, errors.New("could not pick a new session name")
}

// Set by tests only: testHookSessionName replaces the random name of a
// new session directory (to plant something where it will be made);
// testHookSessionDirMade runs once each of its directories is made (to
// swap it, as a sandbox that writes the parent can).
var (
	testHookSessionName    func(name string) string
	testHookSessionDirMade func(path string)
)

// close closes the descriptors not handed on.
func (sd *sessionDir) close() {
	for _, fd := range []*int{&sd.root, &sd.bin, &sd.calls, &sd.responses} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// LeaseRoot makes a directory under parent as a session directory is
// made (see [Open]), mode 0711, and takes its lease: the sessions root of
// a sandbox that lives as long as this process holds it, which
// [PruneSessions] removes once the process is gone. release removes it
// and ends the lease; an error names what stayed (a later prune removes
// it).
func LeaseRoot(parent string) (root string, release func() error, err error) {
	sd, err := createSessionDir(parent)
	if err != nil {
		return "", nil, err
	}
	err = unix.Fchmod(sd.root, 0o711)
	sd.close()
	release = func() error {
		err := hostilefs.RemoveTree(sd.layout.Root)
		sd.lease.release(false)
		return err
	}
	if err != nil {
		release()
		return "", nil, fmt.Errorf("mailbox: create session dir: %w", err)
	}
	return sd.layout.Root, release, nil
}

// PruneSessions removes from dir the sessions whose owner is gone: a
// gb-<hex> session whose lock file is not locked (its gatebridge was
// killed, or the machine lost power), one with no lock file that is older
// than a minute, and lock files left without a session. Directories the
// sandbox made unreadable are removed too; nothing is followed. Sessions
// of other users whose lock file we cannot open are left alone. It returns
// the paths removed; a session it could not remove is a [*PruneError] in
// err (several joined with errors.Join), and stays for the next try. It
// takes at most [hostilefs.RemoveMaxTime] (see [PruneSessionsWithin]).
// [Open] prunes its parent once per process (and again once a minute in a
// long-running one).
func PruneSessions(dir string) (removed []string, err error) {
	return PruneSessionsWithin(dir, hostilefs.RemoveMaxTime)
}

// PruneError is an abandoned session [PruneSessions] could not remove.
type PruneError struct {
	Path string
	Err  error
}

func (e *PruneError) Error() string { return "remove " + e.Path + ": " + e.Err.Error() }
func (e *PruneError) Unwrap() error { return e.Err }

// PruneSessionsWithin is [PruneSessions] giving up after d: the sessions it
// did not get to, or not to the end of, stay for the next prune (a
// [*PruneError] says which).
func PruneSessionsWithin(dir string, d time.Duration) (removed []string, err error) {
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
		base, isLock := strings.CutSuffix(name, mailbox.LockSuffix)
		if !strings.HasPrefix(base, mailbox.SessionPrefix) || len(base) != len(mailbox.SessionPrefix)+32 {
			continue
		}
		root := filepath.Join(dir, base)
		if _, err := os.Lstat(root + mailbox.KeptSuffix); err == nil {
			continue
		}
		if isLock {
			if _, err := os.Lstat(root); err == nil {
				continue // handled with its session
			}
		} else if e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
			continue
		}
		fd, err := unix.Open(root+mailbox.LockSuffix, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
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
		rerr := hostilefs.RemoveTreeWithin(root, time.Until(until))
		if rerr == nil {
			os.Remove(root + mailbox.LockSuffix)
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
