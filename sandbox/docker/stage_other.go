//go:build !linux

package docker

import (
	"context"

	"github.com/gatebridge/gatebridge/sandbox"
)

// stageProtected stages nothing here: the engine mounts by path (see the
// Linux version).
func (b *Backend) stageProtected(context.Context, string, []sandbox.Protected) (map[string]string, func(), error) {
	return nil, func() {}, nil
}

// PruneStaging finds nothing here: nothing is staged.
func PruneStaging() (removed []string, failed []*StageError) { return nil, nil }
