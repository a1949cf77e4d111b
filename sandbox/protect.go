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
		host := filepath.Join(spec.Workspace, rel)
		fi, err := os.Lstat(host)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, Protected{Rel: rel, Host: host, Missing: true})
		case err != nil:
			return nil, &Error{Backend: backend, Op: "protected paths", Err: err}
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, &Error{Backend: backend, Op: "protected paths", Err: fmt.Errorf("protected path %s is a symbolic link", host),
				Hint: "replace the link with the directory itself, or drop it from sandbox.protected_paths"}
		default:
			out = append(out, Protected{Rel: rel, Host: host})
		}
	}
	return out, nil
}

// CleanupProtected removes the empty mount points a run left for missing
// protected paths (and nothing else: a non-empty directory stays).
func CleanupProtected(ps []Protected) {
	for _, p := range ps {
		if p.Missing {
			if fi, err := os.Lstat(p.Host); err == nil && fi.IsDir() {
				os.Remove(p.Host)
			}
		}
	}
}
