package bwrap

import (
	"context"
	"fmt"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Name is the bwrap backend's name in a [sandbox.Registry].
const Name = "bwrap"

// Register adds the bwrap backend to reg. It is not registered by
// importing this package: a program that offers bwrap says so. Its
// constructor reads the Path and ReadOnly of a [Backend] value from
// [sandbox.Settings].Extra[Name] (the defaults when absent).
func Register(reg *sandbox.Registry) error { return reg.Register(Entry()) }

// Entry describes the bwrap backend for a [sandbox.Registry]: strength 1,
// below docker.
func Entry() sandbox.BackendEntry {
	return sandbox.BackendEntry{
		Name:      Name,
		Summary:   "bubblewrap namespaces: no network, read-only system, capabilities dropped",
		Isolates:  "namespaces, no network, capabilities dropped",
		Platforms: []string{"linux"},
		Strength:  1,
		New: func(s sandbox.Settings) (sandbox.Backend, error) {
			c, _ := s.Extra[Name].(Backend)
			return &Backend{Path: c.Path, ReadOnly: c.ReadOnly}, nil
		},
		Available: func(ctx context.Context, b sandbox.Backend) error { return b.(*Backend).Check(ctx) },
		// No Prepare: a check runs bwrap once more (~10-20 ms), and Run
		// diagnoses a sandbox that cannot be set up the same way.
		Doctor: doctor,
	}
}

func doctor(ctx context.Context, b sandbox.Backend, s sandbox.Settings) []sandbox.Finding {
	if err := b.(*Backend).Check(ctx); err != nil {
		return []sandbox.Finding{sandbox.ProblemFinding("backend "+Name, err)}
	}
	l := s.Limits
	mech, missing := LimitsMechanism()
	lim := sandbox.Finding{Check: "bwrap limits", Status: sandbox.StatusOK,
		Detail: fmt.Sprintf("sandbox.limits memory=%d cpus=%g pids=%d enforced with %s; tmp_size=%d with a size-limited tmpfs", l.Memory, l.CPUs, l.Pids, mech, l.TmpSize)}
	if missing != "" && (l.Memory > 0 || l.CPUs > 0 || l.Pids > 0) {
		lim.Status = sandbox.StatusWarn
		lim.Detail = "not enforced: " + missing + "; tmp_size is enforced (a size-limited tmpfs)"
		lim.Hint = "run gatebridge as root, or use --sandbox docker, to have memory, cpus and pids enforced"
	}
	return []sandbox.Finding{
		{Check: "backend " + Name, Status: sandbox.StatusOK, Detail: "usable (namespaces, no network, capabilities dropped)"},
		lim,
	}
}
