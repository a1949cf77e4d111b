package docker

import (
	"context"
	"path/filepath"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// SessionsRoots lists the sessions roots of the engine's persistent
// sandboxes, running or not.
func (d *Backend) SessionsRoots(ctx context.Context) ([]string, error) {
	list, err := d.List(ctx)
	if err != nil {
		return nil, err
	}
	var roots []string
	for _, i := range list {
		if i.SessionsRoot != "" {
			roots = append(roots, i.SessionsRoot)
		}
	}
	return roots, nil
}

// RemoveUnusedRoot removes the sessions root a failed start created, unless
// a sandbox uses it after all (another start of the same name, which found
// it made, won the race). Without the engine's list it is left to `prune`.
func (d *Backend) RemoveUnusedRoot(ctx context.Context, root string) error {
	used, err := d.SessionsRoots(ctx)
	if err != nil {
		return err
	}
	real, _ := filepath.EvalSymlinks(root)
	for _, u := range used {
		if u = filepath.Clean(u); u == root || u == real {
			return nil
		}
	}
	return hostilefs.RemoveTree(root)
}
