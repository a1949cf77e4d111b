package bridge

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/sandbox"
)

// The session env a backend adds (Spec.SessionEnv, set by Run) is PATH,
// TMPDIR and the mailbox's names for the session's dirs, in that order:
// what sandbox.SessionEnv gave before sandbox stopped knowing the names.
func TestSessionEnvNames(t *testing.T) {
	got := sessionEnv(sandbox.SessionDirs(mailbox.LayoutAt("/s")), "/usr/bin:/bin")
	want := []string{"PATH=/s/bin:/usr/bin:/bin", "TMPDIR=/s/tmp", "GATEBRIDGE_CALLS_DIR=/s/calls",
		"GATEBRIDGE_RESPONSES_DIR=/s/responses", "GATEBRIDGE_SESSION_DIR=/s"}
	if !slices.Equal(got, want) {
		t.Errorf("sessionEnv = %q, want %q", got, want)
	}
}

// pollBackend is a backend whose commands FIFO wake-ups do not reach
// (as docker's on Docker Desktop): it forces the wrappers to poll.
type pollBackend struct {
	shBackend
	force bool
}

func (b pollBackend) ForcePoll(context.Context) bool { return b.force }

var _ sandbox.WakeForcer = pollBackend{}

// A backend that forces polling gets GATEBRIDGE_WAKE=poll, over the
// session's own "fifo" and a caller's, and its calls are answered; one
// that does not keeps the session's mode.
func TestRunForcedPoll(t *testing.T) {
	for _, tc := range []struct {
		force bool
		want  string
	}{{true, "poll\nhi\n"}, {false, "fifo\nhi\n"}} {
		s, err := Open(Config{Gates: testRegistry(t), Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res, err := s.Run(ctx, pollBackend{force: tc.force}, sandbox.Spec{
			Command: []string{"sh", "-c", `echo "$GATEBRIDGE_WAKE"; t_echo hi`},
			Env:     []string{mailbox.EnvWake + "=" + mailbox.WakeFIFO}, Workspace: t.TempDir()})
		cancel()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != tc.want || res.ExitCode != 0 {
			t.Errorf("force %v: exit %d stdout %q stderr %q, want %q", tc.force, res.ExitCode, res.Stdout, res.Stderr, tc.want)
		}
	}
}
