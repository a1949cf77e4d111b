package mcpserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// A sandbox that cannot be opened fails Serve at once, before any
// session: the error says so and keeps the hint of the cause (a refused
// workspace, as cmd's guard for the token file refuses one).
func TestServeOpenErrorKeepsHint(t *testing.T) {
	c := testControl()
	c.CheckWorkspace = func(string, bool) error {
		return hint.With(errors.New("it holds the token file"), "keep the token file outside every workspace")
	}
	st, _ := mcp.NewInMemoryTransports()
	err := testServer(t, Options{Control: c}).Serve(context.Background(), st)
	if err == nil || !strings.HasPrefix(err.Error(), "mcp: open the sandbox: ") || !strings.Contains(err.Error(), "it holds the token file") ||
		hint.Of(err) != "keep the token file outside every workspace" {
		t.Fatalf("Serve: %v (hint %q)", err, hint.Of(err))
	}
}
