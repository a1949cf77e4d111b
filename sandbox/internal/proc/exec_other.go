//go:build !linux

package proc

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/gatebridge/gatebridge/sandbox"
)

var errUnsupported = fmt.Errorf("%w: not supported on %s", sandbox.ErrUnavailable, runtime.GOOS)

// Run fails: gatebridge supervises host processes on Linux only.
func Run(ctx context.Context, spec *sandbox.Spec, p *Process) (*sandbox.Result, error) {
	return nil, &sandbox.Error{Backend: p.Backend, Op: "run", Err: errUnsupported,
		Help: "gatebridge runs commands on Linux only; use the docker backend from a Linux host"}
}

// NewGroupTree is nil: [Run] starts nothing here.
func NewGroupTree(*os.Process) Tree { return nil }
