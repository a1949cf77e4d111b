package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
)

// The bash tool's result said nothing of the gate calls the command
// made: a model saw only their output (issue 31). Now its structured
// content lists them (calls, as run --json's, with args_base64 for a
// non-UTF-8 argument, and who denied one) and its text says one line
// each, arguments escaped; a secret in an argument stays redacted.
func TestMCPBashGateCalls(t *testing.T) {
	c := testControl()
	c.Approvals.Settings = map[string]approval.Setting{"read_file": approval.Ask}
	red := secrets.NewRedactor()
	red.Add("TOKEN", "hunter2-secret")
	c.Bridge.Redact = red
	cs, _ := mcpSession(t, Options{Control: c}, nil)
	res, out := bash(t, cs, map[string]any{"command": `gb_echo "$(printf 'caf\351')"; gb_echo hunter2-secret; read_file f; exit 3`})
	got := text(res)
	if len(out.Calls) != 3 || out.CallsDropped != 0 {
		t.Fatalf("calls %+v, dropped %d; text %q", out.Calls, out.CallsDropped, got)
	}
	first, secret, denied := out.Calls[0], out.Calls[1], out.Calls[2]
	if first.Gate != "gb_echo" || first.ExitCode != 0 || first.Decision != "ran" || len(first.ArgsBase64) != 1 ||
		first.ArgsBase64[0] == nil || *first.ArgsBase64[0] != base64.StdEncoding.EncodeToString([]byte("caf\351")) {
		t.Fatalf("a non-UTF-8 argument: %+v", first)
	}
	if strings.Join(secret.Args, " ") != "[secret:TOKEN]" || strings.Contains(got, "hunter2") {
		t.Fatalf("the secret: %+v in %q", secret, got)
	}
	if denied.Gate != "read_file" || denied.ExitCode != 126 || denied.Decision != "denied" || denied.DecidedBy != "no_one" {
		t.Fatalf("the denied call: %+v", denied)
	}
	for _, line := range []string{`[gate call: gb_echo "caf\xe9" → exit 0]`, `[gate call: gb_echo "[secret:TOKEN]" → exit 0]`,
		`[gate call: read_file "f" → exit 126 (denied by no_one)]`} {
		if !strings.Contains(got, line+"\n") {
			t.Fatalf("no line %q in %q", line, got)
		}
	}
}

// The text lists at most maxCallLines calls, then says how many more.
func TestGateCallLinesBounded(t *testing.T) {
	var calls []gateCall
	for i := range 25 {
		calls = append(calls, gateCall{Gate: "g", Args: []string{fmt.Sprint(i), "a\x1b[2J"}, Decision: "ran"})
	}
	got := gateCallLines(gateCalls(nil), 0) + gateCallLines(calls, 2)
	if n := strings.Count(got, "[gate call: "); n != maxCallLines || !strings.HasSuffix(got, "[… 7 more gate calls]\n") ||
		strings.Contains(got, "\x1b") || !strings.Contains(got, `[gate call: g "0" "a\x1b[2J" → exit 0]`) {
		t.Fatalf("%d lines: %q", n, got)
	}
}

// An unknown gate's name is whatever bytes the call file held: the bash
// tool's calls carry one that is not UTF-8 exactly, in gate_base64.
func TestMCPGateCallsUnknownGateExact(t *testing.T) {
	d, err := bridge.NewDispatcher(bridge.Config{Gates: gates.NewRegistry()}, "s")
	if err != nil {
		t.Fatal(err)
	}
	d.Record(d.Dispatch(context.Background(), &bridge.Request{ID: "u", Gate: "no\xff"}).Record)
	recs, _ := d.Records()
	b, err := json.Marshal(gateCalls(recs)[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got, _ := m["gate"].(string)
	if s, ok := m["gate_base64"].(string); ok {
		raw, _ := base64.StdEncoding.DecodeString(s)
		got = string(raw)
	}
	if got != "no\xff" {
		t.Errorf("call %s: the gate reads %q", b, got)
	}
}
