//go:build unix

package gates

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// noRepository is the GIT_DIR of a host gate that runs where the sandbox
// writes and has no protected repository: git finds none ("not a git
// repository") instead of one the sandbox planted.
const noRepository = "/nonexistent/gatebridge: no repository the sandbox cannot write"

// hostCwd is where a command gate that runs on the host works when that
// directory lies in one the sandbox can write: reached from root one
// component at a time at each call, never through a link.
type hostCwd struct {
	root string // the outermost untrusted directory holding it, resolved
	rel  string // below root, clean; "." is root itself
}

// untrustedCwd works out the host gate's working directory: dir, or
// gatebridge's own when dir is "". When it lies in one of untrusted, it
// returns where it is (from the outermost such directory, resolved), and
// the git environment that pins git to the workspace's protected .git
// (GIT_DIR=WORKSPACE/.git, GIT_WORK_TREE=WORKSPACE) when workspace holds
// it and protected lists .git, else to no repository: the sandbox writes
// there, and a .git it planted (a nested sub/.git, a .git file pointing
// elsewhere, an unprotected .git/config) would have git run its
// core.fsmonitor, core.pager, hooks, … on the host. nil, nil, nil when it
// lies in none of them.
func untrustedCwd(dir string, untrusted []string, workspace string, protected []string) (*hostCwd, []string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, nil, nil // nowhere to resolve: as before, the child inherits ours
		}
		dir = wd
	}
	clean := filepath.Clean(dir)
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return nil, nil, err
	}
	var best *hostCwd
	for _, u := range untrusted {
		if u == "" {
			continue
		}
		ru := fspath.Resolved(u)
		in := fspath.Within(real, ru)
		if !in && (fspath.Within(clean, ru) || fspath.Within(clean, filepath.Clean(u))) {
			return nil, nil, fmt.Errorf("%s lies in %s, which the sandbox can write, and leads out of it through a link: name the directory the link points to", dir, ru)
		}
		if !in {
			continue
		}
		rel, err := filepath.Rel(ru, real)
		if err != nil {
			return nil, nil, err
		}
		if best == nil || len(ru) < len(best.root) {
			best = &hostCwd{root: ru, rel: rel}
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	gitDir := noRepository
	if workspace != "" && slices.ContainsFunc(protected, func(p string) bool { return filepath.Clean(p) == ".git" }) {
		rw, err := filepath.EvalSymlinks(workspace)
		if err != nil {
			rw = filepath.Clean(workspace)
		}
		if fspath.Within(real, rw) {
			if _, err := os.Lstat(filepath.Join(rw, ".git")); err == nil {
				gitDir = filepath.Join(rw, ".git")
				return best, []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + rw}, nil
			}
		}
	}
	return best, []string{"GIT_DIR=" + gitDir}, nil
}

// open opens c's directory one component at a time from its root,
// refusing a link on the way (one the sandbox swapped in since the gate
// was made), and returns the directory a child started now must use as
// its working directory (on Linux /proc/self/fd/N of what was opened: the
// child's chdir reaches that directory whatever its path now leads to),
// and a func that closes it once the child has started.
func (c *hostCwd) open() (string, func(), error) {
	root, err := hostilefs.OpenDir(c.root)
	if err != nil {
		return "", nil, err
	}
	defer root.Close()
	d, err := root.Walk(filepath.ToSlash(c.rel), hostilefs.WalkOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("working directory %s: %w (a link there is refused, not followed: the sandbox writes it)", filepath.Join(c.root, c.rel), err)
	}
	if runtime.GOOS != "linux" {
		// No /proc: the path, checked just now (a swap between the check
		// and the child's chdir is not caught here; docs/security.md).
		d.Close()
		return filepath.Join(c.root, c.rel), func() {}, nil
	}
	p := "/proc/self/fd/" + strconv.Itoa(d.Fd())
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		d.Close()
		return "", nil, fmt.Errorf("working directory %s: /proc is needed to start a command in it safely: %v", filepath.Join(c.root, c.rel), err)
	}
	return p, func() { d.Close() }, nil
}

// hasEnv reports whether env sets name.
func hasEnv(env []string, name string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
