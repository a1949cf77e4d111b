package local

import (
	"context"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Name is the local backend's name in a [sandbox.Registry].
const Name = "local"

// Register adds the local backend to reg. It is not registered by
// importing this package: a program that offers unsandboxed runs says so.
func Register(reg *sandbox.Registry) error { return reg.Register(Entry()) }

// Entry describes the local backend for a [sandbox.Registry]: strength 0,
// so auto takes it only when unsandboxed runs are allowed, and last.
func Entry() sandbox.BackendEntry {
	return sandbox.BackendEntry{
		Name:      Name,
		Summary:   "no isolation: the command runs on the host as gatebridge's user",
		Isolates:  "nothing: the command runs on the host",
		Platforms: []string{"linux"},
		New:       func(sandbox.Settings) (sandbox.Backend, error) { return New(), nil },
		Doctor: func(context.Context, sandbox.Backend, sandbox.Settings) []sandbox.Finding {
			return []sandbox.Finding{{Check: "backend " + Name, Status: sandbox.StatusOK,
				Detail: "always usable; it runs commands on the host without isolation"}}
		},
	}
}
