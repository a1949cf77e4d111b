package mcpserver

import (
	"fmt"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// The command policy (policy.commands) is checked once, by the control
// plane, before anything of a command line starts (control.Sandbox.Prepare):
// its refusal, a control.KindPolicy error, is a tool error (toolError)
// that names the command and the rule, then its hint.

// hinted is an error with a hint (internal/hint).
type hinted struct {
	err  error
	help string
}

func (e *hinted) Error() string { return e.err.Error() }
func (e *hinted) Unwrap() error { return e.err }
func (e *hinted) Hint() string  { return e.help }

// toolError is err as a model reads it in a tool error: the message,
// then its hint on a line of its own.
func toolError(err error) error {
	if h := hint.Of(err); h != "" {
		return &hinted{fmt.Errorf("%w\nhint: %s", err, h), h}
	}
	return err
}
