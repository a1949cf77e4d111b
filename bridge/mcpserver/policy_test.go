package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
)

func testPolicy(t *testing.T, rules ...cmdpolicy.Rule) *cmdpolicy.Policy {
	t.Helper()
	p, err := cmdpolicy.New(cmdpolicy.Config{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The bash tool ran any command line, whatever policy.commands said (only
// run and sandbox exec checked it). Now the policy decides the command
// line before anything starts: a command it denies, anywhere in the
// line, is a tool error that names the command and the rule, and nothing
// of the line ran (the file the line would write first is not there), in
// the foreground and in the background. A command it allows runs.
func TestMCPCommandPolicyDenies(t *testing.T) {
	cs, ws := mcpSession(t, Options{Writable: true, Policy: testPolicy(t, cmdpolicy.Rule{Command: "rm", Decision: "deny"})}, nil)
	os.WriteFile(filepath.Join(ws, "keep"), []byte("x"), 0o644)
	for _, background := range []bool{false, true} {
		res, out := bash(t, cs, map[string]any{"command": "touch ran; echo hi | xargs rm -f keep", "background": background})
		got := text(res)
		if !res.IsError || !strings.Contains(got, "policy: command rm -f keep … denied by rule 0 {command: rm, decision: deny}") ||
			!strings.Contains(got, "\nhint: `gatebridge policy check") || out.ProcessID != "" {
			t.Fatalf("background %v: a denied command: %q %+v", background, got, out)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("background %v: the line ran (%v)", background, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "keep")); err != nil {
			t.Fatalf("background %v: keep was removed: %v", background, err)
		}
	}
	if res, out := bash(t, cs, map[string]any{"command": "echo allowed"}); res.IsError || out.Stdout != "allowed\n" {
		t.Fatalf("an allowed command: %q", text(res))
	}
}

// A command the policy marks ask, the client not having declared
// elicitation: no one is asked, and the line exits 126 without any of it
// running, stderr naming the rule and why no one was asked, in the
// foreground and in the background (bash_output reads the exit).
func TestMCPCommandPolicyAsk(t *testing.T) {
	cs, ws := mcpSession(t, Options{Writable: true, Policy: testPolicy(t, cmdpolicy.Rule{Command: "git", Args: []string{"push"}, Decision: "ask"})}, nil)
	for _, background := range []bool{false, true} {
		res, out := bash(t, cs, map[string]any{"command": "touch ran && git push origin main", "background": background})
		stderr := out.Stderr
		// bash_output returns what came since the last read: the stderr
		// may come in one read and the exit in the next.
		for i := 0; background && out.ProcessID != "" && out.Running && i < 50; i++ {
			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash_output", Arguments: map[string]any{"process_id": out.ProcessID, "wait_ms": 20000}})
			if err != nil {
				t.Fatal(err)
			}
			res, out = r, bashOutput{}
			b, _ := json.Marshal(r.StructuredContent)
			json.Unmarshal(b, &out)
			stderr += out.Stderr
		}
		out.Stderr = stderr
		if !res.IsError || out.ExitCode != 126 || out.Running || !strings.Contains(out.Stderr, "policy: command git push origin main needs approval by rule 0") ||
			!strings.Contains(out.Stderr, "did not declare elicitation") || !strings.Contains(out.Stderr, "\ngatebridge: hint: ") {
			t.Fatalf("background %v: an ask command: %q %+v", background, text(res), out)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("background %v: the line ran (%v)", background, err)
		}
	}
}

// A gate that needs approval was asked of nobody: the MCP server's
// in-process protocol client never answered, and the call hung for the
// approval timeout (5 minutes). Now, the client not having declared
// elicitation, it is refused at once, and the command's stderr says so
// and names `gatebridge grants add`.
func TestMCPGateApprovalRefused(t *testing.T) {
	c := testControl()
	c.Approvals.Settings = map[string]approval.Setting{"read_file": approval.Ask}
	cs, ws := mcpSession(t, Options{Control: c}, nil)
	os.WriteFile(filepath.Join(ws, "f"), []byte("secret\n"), 0o644)
	res, out := bash(t, cs, map[string]any{"command": "read_file f"})
	if !res.IsError || out.ExitCode != 126 || strings.Contains(out.Stdout, "secret") || !strings.Contains(out.Stderr, "gatebridge grants add read_file") ||
		!strings.Contains(out.Stderr, "did not declare elicitation") {
		t.Fatalf("a gate that needs approval: %q %+v", text(res), out)
	}
}
