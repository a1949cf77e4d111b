package bridge

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// SandboxRootGrace is how old an unused sandbox sessions root must be to
// be pruned: `sandbox start` makes (or touches) it a moment before the
// container that uses it exists.
const SandboxRootGrace = time.Minute

// SandboxRoot is a default sessions root of a persistent sandbox
// (sandbox-NAME in the default session parent) and when it was last
// changed.
type SandboxRoot struct {
	Path    string
	Changed time.Time
}

// SandboxRoots lists the default sessions roots in parent: real
// directories only (nothing planted there is followed).
func SandboxRoots(parent string) []SandboxRoot {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var out []SandboxRoot
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "sandbox-") || !e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, SandboxRoot{filepath.Join(parent, e.Name()), fi.ModTime()})
	}
	return out
}

// PruneSandboxRoots removes the roots no sandbox uses (inUse: the sessions
// roots of the engine's persistent sandboxes) that are older than grace
// and hold no session any more (a live or kept one keeps its root). It
// returns the paths removed and those it could not remove.
func PruneSandboxRoots(roots []SandboxRoot, inUse []string, grace time.Duration) (removed []string, failed []*PruneError) {
	used := map[string]bool{}
	for _, u := range inUse {
		used[filepath.Clean(u)] = true
		if r, err := filepath.EvalSymlinks(u); err == nil {
			used[r] = true
		}
	}
	for _, r := range roots {
		if used[r.Path] || time.Since(r.Changed) < grace {
			continue
		}
		if real, err := filepath.EvalSymlinks(r.Path); err != nil || used[real] {
			continue
		}
		if hasSession(r.Path) {
			continue
		}
		if err := hostilefs.RemoveTree(r.Path); err != nil {
			failed = append(failed, &PruneError{Path: r.Path, Err: err})
			continue
		}
		removed = append(removed, r.Path)
	}
	return removed, failed
}

// hasSession reports whether dir still holds a session (or its lock or
// kept marker), or cannot be listed.
func hasSession(dir string) bool {
	fd, err := hostilefs.OpenDirNoFollow(dir)
	if err != nil {
		return true
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if strings.HasPrefix(n, mailbox.SessionPrefix) {
				return true
			}
		}
		if err == io.EOF {
			return false
		}
		if err != nil {
			return true
		}
	}
}
