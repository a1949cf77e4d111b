package mcpserver

import (
	"fmt"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// The command policy (policy.commands) is checked once, by the control
// plane, before anything of a command line starts (control.Sandbox.Prepare):
// its refusal, a control.KindPolicy error, is a tool error (toolError)
// that names the command and the rule, then its hint.

// toolError is err as a model reads it in a tool error: the message,
// then its hint on a line of its own.
func toolError(err error) error {
	if h := hint.Of(err); h != "" {
		return hint.With(fmt.Errorf("%w\nhint: %s", err, h), h)
	}
	return err
}
