package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// Protected is a workspace path an isolating backend mounts read-only even
// in a writable workspace ([Spec.ProtectedPaths]).
type Protected struct {
	Rel  string // as configured, cleaned: ".git"
	Host string // absolute host path
	// Missing: nothing is there. The backend mounts an empty read-only
	// directory there so the sandbox cannot create it (a planted .git with
	// hooks would be run by the host's next git command), and removes the
	// empty mount point it left in the workspace afterwards.
	Missing bool
	// created is the first component of Host that was missing: the mount
	// point the backend makes, with its parents, from there down.
	created   string
	workspace string
}

// ProtectedPaths checks spec.ProtectedPaths against the workspace. A path
// must be relative and stay inside the workspace; a symlink is refused
// (the sandbox could not change it, but mounting its target would expose
// whatever it points to).
func ProtectedPaths(backend string, spec *Spec) ([]Protected, error) {
	if spec.Workspace == "" || !spec.WorkspaceWritable {
		return nil, nil // a read-only workspace protects everything already
	}
	var out []Protected
	for _, p := range spec.ProtectedPaths {
		rel := filepath.Clean(p)
		if p == "" || filepath.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, &Error{Backend: backend, Op: "protected paths", Err: fmt.Errorf("%q must be a relative path inside the workspace", p),
				Help: "fix sandbox.protected_paths (e.g. [.git])"}
		}
		pr, err := protectedPath(spec.Workspace, rel)
		if err != nil {
			return nil, &Error{Backend: backend, Op: "protected paths", Err: err,
				Help: "replace the link with the directory itself, or drop it from sandbox.protected_paths"}
		}
		out = append(out, pr)
	}
	return out, nil
}

// protectedPath looks at rel under workspace one component at a time,
// without following links: a symbolic link anywhere on the way (a
// previous run with a writable workspace may have made "tools" a link to
// /root) is refused, since bwrap and docker would resolve it on the host
// and mount its target inside. The first missing component is recorded
// for CleanupProtected.
func protectedPath(workspace, rel string) (Protected, error) {
	pr := Protected{Rel: rel, Host: filepath.Join(workspace, rel), workspace: workspace}
	cur := workspace
	parts := strings.Split(rel, string(filepath.Separator))
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			pr.Missing, pr.created = true, cur
			return pr, nil
		case err != nil:
			return Protected{}, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return Protected{}, fmt.Errorf("protected path %s: %s is a symbolic link", pr.Host, cur)
		case i < len(parts)-1 && !fi.IsDir():
			return Protected{}, fmt.Errorf("protected path %s: %s is not a directory", pr.Host, cur)
		}
	}
	return pr, nil
}

// ProtectedParents returns the directories between the workspace and the
// protected paths (workspace-relative, each once, parents first), less
// those that are protected paths or lie under one (read-only already).
//
// An isolating backend binds each of them onto itself, read-write like the
// workspace. A protected path below the top of the workspace is otherwise
// a read-only mount inside a writable directory: the command could rename
// that directory ("mv tools tools2"; the mount moves with it) and make a
// new tools/hooks that host tools then read. A mount point cannot be
// renamed or removed (EBUSY), and the command has no capability to
// unmount it, so each parent stays where host tools look for it; what is
// in it stays writable.
func ProtectedParents(ps []Protected) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		for dir := filepath.Dir(p.Rel); dir != "." && dir != string(filepath.Separator); dir = filepath.Dir(dir) {
			if !seen[dir] {
				seen[dir] = true
				out = append(out, dir)
			}
		}
	}
	out = slices.DeleteFunc(out, func(dir string) bool {
		for _, p := range ps {
			if dir == p.Rel || strings.HasPrefix(dir, p.Rel+string(filepath.Separator)) {
				return true
			}
		}
		return false
	})
	sort.Slice(out, func(i, j int) bool {
		di, dj := strings.Count(out[i], string(filepath.Separator)), strings.Count(out[j], string(filepath.Separator))
		if di != dj {
			return di < dj
		}
		return out[i] < out[j]
	})
	return out
}

// PinProtected opens what a backend mounts for the protected paths ps of
// workspace: each of their parents ([ProtectedParents]) and each that
// exists, walking one component at a time from the workspace without
// following a link (see pinPaths; Linux only, elsewhere nothing). rels[i]
// is the workspace-relative path files[i] holds; the caller closes them.
// A backend that mounts these objects rather than the paths is safe from
// another sandbox writing the same workspace, which could otherwise swap a
// checked directory for a link to a host directory before the mount.
func PinProtected(backend, workspace string, ps []Protected) (rels []string, files []*os.File, err error) {
	var dirs []bool
	for _, rel := range ProtectedParents(ps) {
		rels, dirs = append(rels, rel), append(dirs, true)
	}
	for _, p := range ps {
		if !p.Missing {
			rels, dirs = append(rels, p.Rel), append(dirs, false)
		}
	}
	if files, err = pinPaths(workspace, rels, dirs); err != nil {
		return nil, nil, &Error{Backend: backend, Op: "protected paths", Err: err,
			Help: "replace the link with the directory itself, or drop it from sandbox.protected_paths"}
	}
	if files == nil {
		rels = nil
	}
	return rels, files, nil
}

// PrepareProtected makes the missing parents of missing protected paths
// (not the paths themselves: the backend makes those as mount points), so
// that the backend can bind each parent onto itself ([ProtectedParents]).
// Each is made like the directory it is made in: same permission bits
// and, when gatebridge is root, same owner, so the command may write in it
// what it could have written had it made it itself. The walk opens one
// component at a time and follows no link. [CleanupProtected] removes them
// again when they are empty.
func PrepareProtected(backend string, ps []Protected) error {
	for _, p := range ps {
		if !p.Missing || p.created == "" || p.created == p.Host || p.workspace == "" {
			continue
		}
		if err := makeParents(p); err != nil {
			return &Error{Backend: backend, Op: "protected paths", Err: fmt.Errorf("make the parents of %s: %w", p.Host, err),
				Help: "check that the workspace is writable by gatebridge, or create the protected path's parent directories yourself"}
		}
	}
	return nil
}

func makeParents(p Protected) error {
	ws, err := hostilefs.OpenDir(p.workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	have, err := filepath.Rel(p.workspace, filepath.Dir(p.created)) // the deepest one there
	if err != nil {
		return err
	}
	want, err := filepath.Rel(filepath.Dir(p.created), filepath.Dir(p.Host))
	if err != nil {
		return err
	}
	base, err := ws.Walk(filepath.ToSlash(have), hostilefs.WalkOptions{})
	if err != nil {
		return err
	}
	defer base.Close()
	info, err := base.Stat()
	if err != nil {
		return err
	}
	o := hostilefs.WalkOptions{Create: true, Perm: info.Mode.Perm(), ExactPerm: true}
	if os.Geteuid() == 0 {
		o.Owner = &hostilefs.Owner{UID: info.UID, GID: info.GID}
	}
	d, err := base.Walk(filepath.ToSlash(want), o)
	if err != nil {
		return err
	}
	return d.Close()
}

// CleanupProtected removes the empty mount points a run left for missing
// protected paths (and nothing else: a non-empty directory stays).
func CleanupProtected(ps []Protected) {
	for _, p := range ps {
		if !p.Missing {
			continue
		}
		top := p.created
		if top == "" {
			top = p.Host
		}
		// From the mount point up to the first directory that was missing;
		// os.Remove leaves anything non-empty (or not a directory) alone.
		// The run is over, so nothing swaps a component for a link between
		// the check and the removal; a link the command left is not
		// followed.
		// A directory that is not there (the run failed before the
		// backend made its mount point) is passed over: the parents
		// PrepareProtected made go all the same.
	up:
		for dir := p.Host; ; dir = filepath.Dir(dir) {
			fi, err := os.Lstat(dir)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil || !fi.IsDir():
				break up
			case p.workspace != "" && linkBelow(p.workspace, dir):
				break up
			case os.Remove(dir) != nil:
				break up
			}
			if dir == top || len(dir) <= len(top) {
				break
			}
		}
	}
}

// linkBelow reports whether a component of path below workspace is a
// symbolic link (or cannot be looked at).
func linkBelow(workspace, path string) bool {
	rel, err := filepath.Rel(workspace, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return true
	}
	cur := workspace
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}
