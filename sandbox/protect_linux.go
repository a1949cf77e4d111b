//go:build linux

package sandbox

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// pinPaths opens each workspace-relative path of rels under workspace,
// walking one component at a time without following a link, as O_PATH
// descriptors for bwrap's --bind-fd and --ro-bind-fd: bwrap then mounts
// the object opened here (and checks that it did), not whatever the path
// names by the time it mounts. Another sandbox writing the same workspace
// could otherwise swap a checked directory for a symbolic link to a host
// directory in between, and this sandbox would get that directory, a
// protected path's parent read-write. A symbolic link is refused; a
// parent (dirs[i]) must be a directory.
func pinPaths(workspace string, rels []string, dirs []bool) ([]*os.File, error) {
	ws, err := hostilefs.OpenDir(workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for i, rel := range rels {
		rel = filepath.ToSlash(rel)
		dir, base := path.Split(rel)
		d, err := ws.Walk(path.Clean(dir), hostilefs.WalkOptions{})
		if err != nil {
			return fail(err)
		}
		fd, err := unix.Openat(d.Fd(), base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		d.Close()
		if err != nil {
			return fail(&fs.PathError{Op: "open", Path: rel, Err: err})
		}
		f := os.NewFile(uintptr(fd), filepath.Join(workspace, rel))
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			return fail(&fs.PathError{Op: "stat", Path: rel, Err: err})
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			f.Close()
			return fail(&fs.PathError{Op: "open", Path: rel, Err: hostilefs.ErrSymlink})
		case dirs[i] && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			f.Close()
			return fail(&fs.PathError{Op: "open", Path: rel, Err: hostilefs.ErrNotDir})
		}
		files = append(files, f)
	}
	return files, nil
}
