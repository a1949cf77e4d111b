//go:build !linux

package agent

import (
	"context"
	"errors"

	"github.com/gatebridge/gatebridge/sandbox"
)

var errNotLinux = errors.New("the command agent needs Linux (FIFOs and inotify shared with the sandbox)")

// Prepare fails outside Linux.
func Prepare(dir string, uid, gid int) error { return errNotLinux }

// Conn is the host's side of an agent directory (Linux only).
type Conn struct{}

// Dial fails outside Linux.
func Dial(ctx context.Context, dir string, opts DialOptions) (*Conn, error) { return nil, errNotLinux }

// User is not available outside Linux.
func (c *Conn) User() (uid, gid int) { return -1, -1 }

// Path is not available outside Linux.
func (c *Conn) Path() string { return "" }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Run fails outside Linux.
func (c *Conn) Run(ctx context.Context, cmd Command, spec *sandbox.Spec) (*sandbox.Result, error) {
	return nil, errNotLinux
}

// TTYSupport fails outside Linux.
func (c *Conn) TTYSupport() error { return errNotLinux }

// Arg0Support fails outside Linux.
func (c *Conn) Arg0Support() error { return errNotLinux }
