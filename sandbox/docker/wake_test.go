package docker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// The backend's GATEBRIDGE_WAKE=poll (Docker Desktop: FIFOs do not cross
// the VM) was overridden by the session's own "fifo", because Session.Run
// puts its env in spec.Env, which the backend merged last. Through a real
// session the command must see poll, and its calls must still work.
func TestWakePollThroughSession(t *testing.T) {
	b, _ := newBackend(t, Config{Wake: WakePoll})
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_echo", Summary: "echo"}, func(ctx context.Context, c *gates.Call) (int, error) {
		fmt.Fprintln(c.Stdout, strings.Join(c.Args, " "))
		return 0, nil
	}))
	s, err := bridge.Open(bridge.Config{Gates: reg, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Run(context.Background(), b, sandbox.Spec{Command: []string{"sh", "-c", `echo "$GATEBRIDGE_WAKE"; t_echo hi`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "poll\nhi\n" || res.ExitCode != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", res.ExitCode, got, res.Stderr)
	}
}
