package mcpserver

import (
	"context"
	"fmt"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/internal/hint"
)

// checkPolicy decides argv with the command policy before anything
// starts: nil to go on, else the tool error (it names the command and
// the rule, and says what to do).
func (h *host) checkPolicy(ctx context.Context, argv []string) error {
	r := h.opts.Policy.CheckArgv(argv)
	switch r.Decision {
	case cmdpolicy.Allow:
		return nil
	case cmdpolicy.Ask:
		return toolError(ask(ctx, r.Err(), "this command needs a person's approval (policy.commands says ask)",
			"change the rule to allow in policy.commands (`gatebridge policy check` shows which rule decides)"))
	}
	return toolError(r.Err())
}

// ask is where the MCP server asks a person to approve what err refuses
// (a command the policy marks ask, a gate that needs approval).
//
// APPROVAL FRONT END GOES HERE: until bridge/approval (issue 29) is wired
// (MCP elicitation when the client declares it, else grants), ask is a
// refusal whose hint names `gatebridge grants`.
func ask(_ context.Context, err error, what, otherwise string) error {
	return &hinted{err, what + ", and this MCP server cannot ask anyone yet: " +
		"`gatebridge grants add` will allow it ahead of time (once approvals land); until then " + otherwise}
}

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
