package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
				Hint: "fix sandbox.protected_paths (e.g. [.git])"}
		}
		pr, err := protectedPath(spec.Workspace, rel)
		if err != nil {
			return nil, &Error{Backend: backend, Op: "protected paths", Err: err,
				Hint: "replace the link with the directory itself, or drop it from sandbox.protected_paths"}
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
		for dir := p.Host; ; dir = filepath.Dir(dir) {
			if p.workspace != "" && linkBelow(p.workspace, dir) {
				break
			}
			if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || os.Remove(dir) != nil {
				break
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
