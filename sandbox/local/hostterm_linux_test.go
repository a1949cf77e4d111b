package local_test

import (
	"testing"

	"github.com/gatebridge/gatebridge/sandbox/local"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

func TestHelperHostTerm(t *testing.T) { sandboxtest.HostTerminalHelper(t, local.New()) }

// A command on a terminal of its own can neither write to nor type into
// gatebridge's controlling terminal.
func TestLocalTTYHostTerminalUntouched(t *testing.T) {
	sandboxtest.HostTerminalUntouched(t, "TestHelperHostTerm")
}
