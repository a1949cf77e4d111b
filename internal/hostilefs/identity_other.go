//go:build !linux

package hostilefs

// CanActAsOwner: [AsOwner] does not change its identity here (no
// per-thread setfsuid); as root it acts as root.
const CanActAsOwner = false

// ActAs is nil here: see [CanActAsOwner].
func ActAs(uid, gid int) *Owner { return nil }

// AsOwner runs fn as this process, here: see [CanActAsOwner].
func AsOwner(_ Owner, fn func() error) error { return fn() }
