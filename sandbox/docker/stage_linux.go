package docker

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"

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
// mounts), unmounts and removes them. (Where / is a shared mount, the
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
	release = func() {}
	if ws == "" || len(ps) == 0 || !b.canStage() {
		return nil, release, nil
	}
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
	dir, err := os.MkdirTemp("/run", "gatebridge-stage-") // 0700
	if err != nil {
		dir, err = os.MkdirTemp("", "gatebridge-stage-")
	}
	if err != nil {
		return fail("make the staging directory", err)
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
		})
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
