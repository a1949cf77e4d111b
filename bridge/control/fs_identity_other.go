//go:build !linux

package control

import "github.com/gatebridge/gatebridge/internal/hostilefs"

// identityChecks: the file API does not change its identity here (no
// per-thread setfsuid); as root it acts as root.
const identityChecks = false

func asIdentity(_ hostilefs.Owner, fn func() error) error { return fn() }
