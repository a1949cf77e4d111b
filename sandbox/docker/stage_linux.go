package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/sandbox"
)

// stageProtected makes the engine mount the protected paths' parents and
// the existing protected paths as gatebridge checked them, not by path.
//
// The engine takes a bind mount's source as a path and resolves it when
// the container starts. Another sandbox writing the same workspace can
// swap a checked directory for a link to a host directory in between,
// and the engine then mounts that directory (read-write, for a protected
// path's parent). So each is opened here one component at a time without
// following a link (sandbox.PinProtected) and bind-mounted, from its
// descriptor, onto an empty entry of a staging directory of gatebridge's
// (/run/gatebridge-stage-*, 0700), which the engine is given instead:
// whatever the workspace holds by then, the engine mounts the object
// opened. release, called once the container has started (it keeps its
// mounts), unmounts and removes them; a gatebridge killed before release
// leaves them to [PruneStaging] (`gatebridge prune`, and the start of
// every docker run), which knows them by their free lock. (Where / is a shared mount, the
// staged mounts propagate to the mount namespaces that receive from it,
// behind the 0700 directory, and so does their unmount: a staging
// directory made a private mount of its own would leave a copy of it in
// each of those namespaces at every run.)
//
// This needs root (to mount) and an engine in this mount namespace (to
// see the staged mounts). Elsewhere (not root; a rootless engine, Docker
// Desktop, a remote engine) nothing is staged and the engine mounts by
// path: see docs/security.md.
func (b *Backend) stageProtected(ctx context.Context, ws string, ps []sandbox.Protected) (staged map[string]string, release func(), err error) {
	if ws == "" || len(ps) == 0 || !b.canStage() {
		return nil, func() {}, nil
	}
	return stage(stageParents(), ws, ps)
}

// stagePrefix begins the name of every staging directory; the rest is
// random (os.MkdirTemp).
const stagePrefix = "gatebridge-stage-"

// stageParents are where staging directories are made: the first that
// works. [PruneStaging] looks in each.
func stageParents() []string { return []string{"/run", os.TempDir()} }

// stage does stageProtected's work, in a staging directory made in the
// first of parents that works.
//
// The directory is locked (flock, on the directory itself) from the
// moment it is made until release has removed it: a lock that is free
// says its gatebridge died between staging and release (killed while the
// engine created or started the container) and left its mounts behind,
// which [PruneStaging] then removes. The lock's descriptor is close-on-exec:
// no program gatebridge starts inherits it, so none keeps a dead
// gatebridge's directory looking alive.
func stage(parents []string, ws string, ps []sandbox.Protected) (staged map[string]string, release func(), err error) {
	release = func() {}
	rels, files, err := sandbox.PinProtected("docker", ws, ps)
	if err != nil {
		return nil, release, err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) == 0 {
		return nil, release, nil
	}
	fail := func(op string, err error) (map[string]string, func(), error) {
		release()
		return nil, func() {}, &sandbox.Error{Backend: "docker", Op: "protected paths", Err: fmt.Errorf("%s: %w", op, err),
			Help: "gatebridge, as root, has the engine mount the protected paths' parents from what it opened, through a staging directory in /run (or the temp dir)"}
	}
	var dir string
	for _, parent := range parents {
		if dir, err = os.MkdirTemp(parent, stagePrefix); err == nil { // 0700
			break
		}
	}
	if err != nil {
		return fail("make the staging directory", err)
	}
	lock, err := os.Open(dir)
	if err == nil {
		if err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.Remove(dir)
		return fail("lock the staging directory", err)
	}
	var points []string
	var once sync.Once
	release = func() {
		once.Do(func() {
			for i := len(points) - 1; i >= 0; i-- {
				unix.Unmount(points[i], unix.MNT_DETACH)
				os.Remove(points[i])
			}
			os.Remove(dir)
			lock.Close()
		})
	}
	if testHookStaged != nil {
		defer func() {
			if err == nil {
				testHookStaged(dir)
			}
		}()
	}
	staged = map[string]string{}
	for i, f := range files {
		pt := filepath.Join(dir, strconv.Itoa(i))
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return fail("stat "+rels[i], err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = os.Mkdir(pt, 0o700)
		} else {
			err = os.WriteFile(pt, nil, 0o600)
		}
		if err != nil {
			return fail("make a mount point", err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), pt, "", unix.MS_BIND, ""); err != nil {
			os.Remove(pt)
			return fail("mount "+rels[i], err)
		}
		points = append(points, pt)
		staged[filepath.Join(ws, rels[i])] = pt
	}
	return staged, release, nil
}

// testHookStaged, set by tests only, runs when stage has made its mounts,
// with the staging directory.
var testHookStaged func(dir string)

// stageGrace is how old a staging directory nobody holds the lock of must
// be before [PruneStaging] removes it: one just made is locked a moment
// later, and a gatebridge from before the lock never takes it (its
// staging lasts until its container has started).
const stageGrace = time.Minute

// PruneStaging removes the staging directories (see stageProtected) that
// a gatebridge killed between staging and its container's start left
// behind, with their mounts of workspace directories: in /run and the
// temp dir, those named gatebridge-stage-*, owned by this user, 0700,
// whose lock no process holds, older than a minute. Each entry is
// unmounted (as often as it is mounted), then removed only if it is
// empty: nothing is removed through a mount, and what cannot be removed
// is reported, not forced. Only root stages, so only root prunes; for any
// other user it does nothing.
func PruneStaging() (removed []string, failed []*StageError) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	return pruneStaging(stageParents(), stageGrace)
}

func pruneStaging(parents []string, grace time.Duration) (removed []string, failed []*StageError) {
	seen := map[string]bool{}
	for _, parent := range parents {
		if seen[parent] {
			continue
		}
		seen[parent] = true
		pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		pf := os.NewFile(uintptr(pfd), parent)
		names, _ := pf.Readdirnames(-1)
		for _, name := range names {
			if !strings.HasPrefix(name, stagePrefix) {
				continue
			}
			path := filepath.Join(parent, name)
			switch ok, err := pruneStage(pfd, name, grace); {
			case err != nil:
				failed = append(failed, &StageError{Path: path, Err: err})
			case ok:
				removed = append(removed, path)
			}
		}
		pf.Close()
	}
	return removed, failed
}

// pruneStage removes the staging directory name in the directory pfd if
// it is a dead gatebridge's (ok), or leaves it (not ours, alive, young).
func pruneStage(pfd int, name string, grace time.Duration) (ok bool, err error) {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil // gone, a link, not a directory: not ours
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // and with it the lock
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return false, nil // another user's, or not as we make them
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false, nil // its gatebridge is alive (or another prune is at it)
	}
	if time.Since(time.Unix(st.Mtim.Unix())) < grace {
		return false, nil // just made (or changed), maybe not locked yet
	}
	entries, err := f.Readdirnames(-1)
	if err != nil {
		return false, fmt.Errorf("list: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if err := unstage(fd, e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e, err))
		}
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil {
		return false, err
	}
	return true, nil
}

// unstage unmounts the entry name of the staging directory dirfd (every
// mount on it) and removes it if it is then empty (a mount point stage
// made: an empty directory or file). Nothing is removed through a mount.
func unstage(dirfd int, name string) error {
	path := "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
	for range 64 {
		if err := unix.Unmount(path, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				break // not (or no more) a mount point
			}
			return fmt.Errorf("unmount: %w", err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	flags := 0
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		flags = unix.AT_REMOVEDIR // fails unless empty
	case unix.S_IFREG:
		if st.Size != 0 {
			return errors.New("not an empty mount point: left")
		}
	}
	if err := unix.Unlinkat(dirfd, name, flags); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove: %w", err)
	}
	return nil
}

// canStage reports whether protected paths can be staged (see
// stageProtected): gatebridge is root and the engine, reached on a local
// Unix socket, runs in this mount namespace (the socket's peer).
func (b *Backend) canStage() bool {
	b.stageOnce.Do(func() {
		if os.Geteuid() != 0 {
			return
		}
		u, err := url.Parse(b.cli.DaemonHost())
		if err != nil || u.Scheme != "unix" {
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		if unix.Connect(fd, &unix.SockaddrUnix{Name: u.Path}) != nil {
			return
		}
		cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil || cred.Pid <= 0 {
			return // a peer in another pid namespace shows as 0
		}
		theirs, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", cred.Pid))
		ours, err2 := os.Readlink("/proc/self/ns/mnt")
		b.stage = err1 == nil && err2 == nil && theirs == ours
	})
	return b.stage
}
