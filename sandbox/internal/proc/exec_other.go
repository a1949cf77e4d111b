//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"runtime"
)

var errUnsupported = fmt.Errorf("%w: not supported on %s", ErrUnavailable, runtime.GOOS)

func runProcess(ctx context.Context, spec *Spec, p *process) (*Result, error) {
	return nil, &Error{Backend: p.backend, Op: "run", Err: errUnsupported,
		Help: "gatebridge runs commands on Linux only; use the docker backend from a Linux host"}
}

func newGroupTree(*os.Process) procTree { return nil }

func newNSTree(*os.Process, *bwrapStatus) procTree { return nil }

func newSessionKeyring() error { return nil }

type limitCgroup struct{}

func newLimitCgroup(Limits) (*limitCgroup, error) { return nil, nil }
func (*limitCgroup) remove()                      {}
func (*limitCgroup) enter() error                 { return nil }
func (*limitCgroup) leave()                       {}
func (*limitCgroup) report() string               { return "" }

// LimitsMechanism says how limits are enforced here: not at all.
func LimitsMechanism() (string, string) { return "none", "memory, cpus, pids: needs Linux" }

// PruneCgroups removes nothing: no limit cgroups outside Linux.
func PruneCgroups() []string { return nil }

func pinPaths(string, []string, []bool) ([]*os.File, error) { return nil, nil }
