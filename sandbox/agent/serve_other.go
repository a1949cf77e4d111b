//go:build !linux

package agent

import (
	"context"
	"errors"
	"time"
)

// Options configure [Serve].
type Options struct {
	Dir      string
	Version  string
	Logf     func(format string, args ...any)
	Reap     bool
	WaitHost time.Duration
}

// Serve fails outside Linux.
func Serve(ctx context.Context, opts Options) error {
	return errors.New("gatebridge agent runs on Linux only")
}
