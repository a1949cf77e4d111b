package mcpserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
)

// The tool's description said "Files written in the workspace persist
// between calls" for a read-only workspace, and nothing of /tmp or the
// network. Now it says what the open sandbox's backend states: under
// bwrap, read-only, that nothing persists in the workspace and there is
// no network; writable, that files persist; and the command limits
// when set.
func TestMCPDescriptionTrueForBwrap(t *testing.T) {
	for _, writable := range []bool{false, true} {
		c := testControl()
		c.MaxCommands = 7
		set := testSettings(t, Options{Backend: bwrap.Name, Writable: writable, Control: c})
		h, err := New(set).newHost(context.Background(), nil)
		if errors.Is(err, sandbox.ErrUnavailable) {
			t.Skipf("bwrap cannot run here: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		d := h.description
		h.close()
		persists := strings.Contains(d, "persist between calls")
		if persists != writable || !strings.Contains(d, "There is no network.") || !strings.Contains(d, "/tmp starts empty in every call") ||
			!strings.Contains(d, "at most 7 commands (sandbox.max_commands)") {
			t.Errorf("writable %v: description:\n%s", writable, d)
		}
		if !writable && !strings.Contains(d, "The workspace is read-only") {
			t.Errorf("read-only: description:\n%s", d)
		}
	}
}
