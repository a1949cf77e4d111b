package control

import (
	"errors"
	"fmt"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Kind sorts the control plane's errors once, for every front end: the
// JSON-RPC server maps a Kind to its error code, the CLI and the MCP
// server to their own words.
type Kind int

const (
	// KindInternal is anything not sorted below (a backend's failure, an
	// I/O error).
	KindInternal Kind = iota
	// KindInvalid is a request the caller must change (a bad field).
	KindInvalid
	// KindNotFound names a sandbox or process that is not (or no longer)
	// there.
	KindNotFound
	// KindConflict is a name already taken.
	KindConflict
	// KindLimit is a bound reached; the same request may succeed later.
	KindLimit
	// KindUnavailable is no sandbox that can run here
	// (sandbox.ErrUnavailable).
	KindUnavailable
	// KindPolicy is a command the command policy refused before it
	// started; the *Error wraps the *cmdpolicy.DeniedError.
	KindPolicy
)

// Error is an error of the control plane: its Kind, a message, an
// optional hint (read through internal/hint), and what it wraps.
type Error struct {
	Kind Kind
	// Field is the request field the error is about ("" for none), in
	// the protocol's spelling ("cwd", "workspace").
	Field string
	Msg   string
	Help  string
	Err   error
}

func (e *Error) Error() string { return e.Msg }

// Hint implements the internal/hint carrier.
func (e *Error) Hint() string { return e.Help }

func (e *Error) Unwrap() error { return e.Err }

func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// KindOf sorts err: an image the configuration refuses
// (sandbox.ErrImageRefused: the caller chose it) as KindInvalid, a
// control *Error by its Kind, anything that is sandbox.ErrUnavailable as
// KindUnavailable, the rest as KindInternal.
func KindOf(err error) Kind {
	if errors.Is(err, sandbox.ErrImageRefused) {
		return KindInvalid
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, sandbox.ErrUnavailable) {
		return KindUnavailable
	}
	return KindInternal
}

// Data kinds: what a failure is, in the words run --json uses for
// error.kind (docs/json.md), for a front end to name besides the Kind.
const (
	DataImageRefused = "image_refused" // not in sandbox.docker.images
	DataImagePull    = "image_pull"    // not present, and pulling it failed
	DataImageMissing = "image_missing" // not present, and pulling is off
)

// DataKind names err's failure when a caller can act on it by its
// kind (one of the Data* constants), else "".
func DataKind(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrImageRefused):
		return DataImageRefused
	case errors.Is(err, sandbox.ErrImagePull):
		return DataImagePull
	case errors.Is(err, sandbox.ErrImageMissing):
		return DataImageMissing
	}
	return ""
}

// ErrNoAnswer is the cause of the context a front end's Answerer or
// Approver gets once the gate's or the approval's time is up.
var ErrNoAnswer = errors.New("the runtime did not answer in time")
