package agent_test

import (
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// The Go agent opens a terminal inside the sandbox (here: on this host).
func TestTTY(t *testing.T) {
	c, _ := startAgent(t)
	sandboxtest.RunTTY(t, func(*testing.T) sandbox.Backend {
		return writable{&agent.Attached{Conn: c, Root: "/"}}
	}, sandboxtest.Options{})
}

// The sh agent cannot: it says so, naming the agent backend, and runs
// nothing, for a terminal as for an argv[0].
func TestTTYShRefused(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			c, _ := startShAgent(t, sh)
			b := writable{&agent.Attached{Conn: c, Root: "/"}}
			sandboxtest.RunTTYRefused(t, b, sandboxtest.NewFixture(t, sandboxtest.Options{}))
			if err := sandbox.Arg0Support(b); err == nil {
				t.Error("Arg0Support = nil for the sh agent")
			}
			f := sandboxtest.NewFixture(t, sandboxtest.Options{})
			spec := f.Spec("echo ran")
			spec.Arg0 = "-sh"
			if res, err := b.Run(t.Context(), spec); err == nil {
				t.Errorf("Run with Arg0 on the sh agent ran it: %+v", res)
			}
		})
	}
}
