//go:build !linux

package agent

import (
	"context"
	"errors"
)

// Serve fails outside Linux.
func Serve(ctx context.Context, opts Options) error {
	return errors.New("gatebridge agent runs on Linux only")
}
