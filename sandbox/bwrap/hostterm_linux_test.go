package bwrap_test

import (
	"testing"

	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

func TestHelperHostTerm(t *testing.T) { sandboxtest.HostTerminalHelper(t, bwrap.New()) }

// A command on a terminal of its own, which bwrap runs without
// --new-session, can neither write to nor type into gatebridge's
// controlling terminal.
func TestBwrapTTYHostTerminalUntouched(t *testing.T) {
	newBwrap(t)
	sandboxtest.HostTerminalUntouched(t, "TestHelperHostTerm")
}
