package rpc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/gatebridge/gatebridge/bridge/rpc"

	"github.com/gatebridge/gatebridge/gates/secrets"
)

// What a runtime sees of a process (process/output, the snapshot, the
// answer in process/exited) is redacted, also a value the command writes
// in two pieces with a pause between.
func TestProcessOutputRedacted(t *testing.T) {
	const value = "ghp_runtime0123456789secret"
	red := secrets.NewRedactor()
	red.Add("gh", value)
	opts := testOptions(t)
	opts.Bridge.Redact = red
	c := newClient(t, opts)
	c.openSandbox("sb", "local", false)
	c.Call(MethodProcessStart, ProcessStartParams{ProcessID: "p", SandboxID: "sb", Env: map[string]string{"A": value[:10], "B": value[10:]},
		Argv: []string{"sh", "-c", `printf 'x %s' "$A"; sleep 0.2; printf '%s y\n' "$B"; submit "$A$B"`}}, nil)
	var out strings.Builder
	var exited ProcessExitedParams
	for {
		m := c.Next(30*time.Second, func(m *Message) bool {
			return m.Method == MethodProcessOutput || m.Method == MethodProcessExited
		})
		if m.Method == MethodProcessExited {
			json.Unmarshal(m.Params, &exited)
			break
		}
		var p ProcessOutputParams
		json.Unmarshal(m.Params, &p)
		out.Write(p.Chunk)
	}
	if out.String() != "x [secret:gh] y\n" {
		t.Errorf("process/output: %q", out.String())
	}
	if exited.Answer == nil || *exited.Answer != "[secret:gh]" {
		t.Errorf("answer: %v", exited.Answer)
	}
	var snap ProcessSnapshotResult
	c.Call(MethodProcessSnapshot, ProcessIDParams{ProcessID: "p"}, &snap)
	if strings.Contains(string(snap.Stdout), value) {
		t.Errorf("snapshot: %q", snap.Stdout)
	}
}
