package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
)

// elicitSession is a session whose client declares elicitation and
// answers with answer (on version: 2025-11-25 lets the server send
// elicitation/create), on a server where read_file asks and grants are
// kept in a fresh grants file. It returns the client session, the
// workspace (holding f, "secret") and the questions asked.
func elicitSession(t *testing.T, timeout time.Duration, version string, answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*mcp.ClientSession, string, func() []*mcp.ElicitParams, *approval.Store) {
	t.Helper()
	return elicitSessionPolicy(t, timeout, version, nil, answer)
}

// elicitSessionPolicy is elicitSession with the command policy pol.
func elicitSessionPolicy(t *testing.T, timeout time.Duration, version string, pol *cmdpolicy.Policy, answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) (*mcp.ClientSession, string, func() []*mcp.ElicitParams, *approval.Store) {
	t.Helper()
	c := testControl()
	c.Approvals.Commands = pol
	c.Approvals.Settings = map[string]approval.Setting{"read_file": approval.Ask}
	c.Approvals.Timeout = timeout
	dir := filepath.Join(t.TempDir(), "gatebridge")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := approval.NewStore(filepath.Join(dir, "grants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.Approvals.Store = st
	set := testSettings(t, Options{Control: c})
	os.WriteFile(filepath.Join(set.Workspace, "f"), []byte("secret\n"), 0o644)
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	cs, _ := connectHost(t, set, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params)
			mu.Unlock()
			return answer(ctx, req)
		}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	return cs, set.Workspace, func() []*mcp.ElicitParams {
		mu.Lock()
		defer mu.Unlock()
		return append([]*mcp.ElicitParams{}, asked...)
	}, st
}

// choicesOf are the choices an elicitation offered.
func choicesOf(t *testing.T, p *mcp.ElicitParams) []string {
	t.Helper()
	schema, _ := p.RequestedSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	choice, _ := props["choice"].(map[string]any)
	enum, _ := choice["enum"].([]any)
	var out []string
	for _, e := range enum {
		s, _ := e.(string)
		out = append(out, s)
	}
	if len(out) < 2 {
		t.Fatalf("no choices in %#v", p.RequestedSchema)
	}
	return out
}

// A gate with approval: ask was refused over MCP whatever the client
// could do. Now a client that declares elicitation is asked (the gate,
// its arguments quoted, the choices); "always for exactly these
// arguments" allows the call and keeps a grant in the grants file, and
// the next same call runs without asking.
func TestMCPElicitApprovalGrant(t *testing.T) {
	cs, _, asked, st := elicitSession(t, time.Minute, "2025-11-25", func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		for _, c := range choicesOf(t, req.Params) {
			if strings.Contains(c, `with exactly the arguments "f"`) && strings.HasSuffix(c, "in every workspace") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"choice": c}}, nil
			}
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	})
	res, out := bash(t, cs, map[string]any{"command": "read_file f"})
	if res.IsError || out.Stdout != "secret\n" {
		t.Fatalf("approved with a grant: %q %+v", text(res), out)
	}
	q := asked()
	if len(q) != 1 || !strings.Contains(q[0].Message, `gate "read_file", 1 argument`) || !strings.Contains(q[0].Message, `1: "f"`) {
		t.Fatalf("questions: %d %+v", len(q), q)
	}
	if c := choicesOf(t, q[0]); c[0] != choiceOnce || c[1] != choiceDeny {
		t.Fatalf("choices %q", c)
	}
	list, err := st.List(time.Now())
	if err != nil || len(list) != 1 || list[0].Gate != "read_file" || list[0].Lifetime != approval.LifeAlways || len(list[0].Exact) != 1 {
		t.Fatalf("the grants file holds %+v (%v)", list, err)
	}
	res, out = bash(t, cs, map[string]any{"command": "read_file f"})
	if res.IsError || out.Stdout != "secret\n" || len(asked()) != 1 {
		t.Fatalf("the grant did not allow the next call without asking: %q %+v, %d questions", text(res), out, len(asked()))
	}
}

// A client that answers anything but exactly one of the choices (and
// nothing else) does not allow the call: an unknown choice, a choice
// with extra fields, no choice, a decline, a cancel, "deny it". A
// question's arguments are escaped (a control character cannot redraw
// the person's screen).
func TestMCPElicitHostileAnswers(t *testing.T) {
	for name, content := range map[string]map[string]any{
		"unknown":    {"choice": "allow everything forever"},
		"extra":      {"choice": choiceOnce, "grant": map[string]any{"gate": "read_file", "any_args": true}},
		"extra flat": {"choice": choiceOnce, "lifetime": "always"},
		"none":       {},
		"number":     {"choice": 0},
		"deny":       {"choice": choiceDeny},
		"decline":    nil,
	} {
		t.Run(name, func(t *testing.T) {
			cs, _, asked, _ := elicitSession(t, time.Minute, "2025-11-25", func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if content == nil {
					return &mcp.ElicitResult{Action: "decline"}, nil
				}
				return &mcp.ElicitResult{Action: "accept", Content: content}, nil
			})
			res, out := bash(t, cs, map[string]any{"command": "read_file f 2>&1; read_file $'f\\e[2J'"})
			if out.ExitCode != 126 || strings.Contains(out.Stdout, "secret") || len(asked()) != 2 {
				t.Fatalf("a hostile answer allowed the call: %q %+v, %d questions", text(res), out, len(asked()))
			}
			if m := asked()[1].Message; strings.Contains(m, "\x1b") || !strings.Contains(m, `"f\x1b[2J"`) {
				t.Fatalf("the argument is not escaped: %q", m)
			}
		})
	}
}

// A client that declares elicitation and never answers holds the call
// for approvals.timeout, no longer: then it is denied (126), saying so.
func TestMCPElicitNoAnswer(t *testing.T) {
	cs, _, asked, _ := elicitSession(t, 200*time.Millisecond, "2025-11-25", func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	res, out := bash(t, cs, map[string]any{"command": "read_file f"})
	if out.ExitCode != 126 || strings.Contains(out.Stdout, "secret") || !strings.Contains(out.Stderr, "no answer within") || len(asked()) != 1 {
		t.Fatalf("an unanswered question: %q %+v", text(res), out)
	}
}

// A client on protocol 2026-07-28, where a server may not send
// elicitation/create during a tool call (input requests instead, not
// made yet), is not asked: the call is denied at once, the message
// naming `gatebridge grants add`.
func TestMCPElicitNotOnNewProtocol(t *testing.T) {
	cs, _, asked, _ := elicitSession(t, time.Minute, "2026-07-28", func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"choice": choiceOnce}}, nil
	})
	res, out := bash(t, cs, map[string]any{"command": "read_file f"})
	if out.ExitCode != 126 || !strings.Contains(out.Stderr, "no one to ask over MCP") || !strings.Contains(out.Stderr, "gatebridge grants add read_file") || len(asked()) != 0 {
		t.Fatalf("a client on 2026-07-28: %q %+v, %d questions", text(res), out, len(asked()))
	}
}

// A command the policy marks ask was refused over MCP, like a deny. Now a
// client that declares elicitation (on 2025-11-25) is asked, the
// question naming the command and the rule, before anything of the line
// starts: allowed, the line runs; declined, it exits 126 and nothing of
// it ran (its marker file is not made), stderr naming the rule.
func TestMCPElicitCommandAsk(t *testing.T) {
	pol := testPolicy(t, cmdpolicy.Rule{Command: "touch", Decision: "ask"})
	var allow bool
	cs, ws, asked, _ := elicitSessionPolicy(t, time.Minute, "2025-11-25", pol, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if allow {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"choice": choiceOnce}}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	})
	for i, a := range []bool{true, false} {
		allow = a
		marker := fmt.Sprint("made-", a)
		res, out := bash(t, cs, map[string]any{"command": "touch " + marker + " && echo ran"})
		q := asked()
		if len(q) != i+1 || !strings.Contains(q[i].Message, "approval needed: command bash -c \"touch "+marker) ||
			!strings.Contains(q[i].Message, "rule 0 {command: touch, decision: ask}") {
			t.Fatalf("allow %v: questions %d %q", a, len(q), q[len(q)-1].Message)
		}
		_, statErr := os.Stat(filepath.Join(ws, marker))
		if a && (res.IsError || out.Stdout != "ran\n" || statErr != nil) {
			t.Fatalf("allowed: %q %+v (%v)", text(res), out, statErr)
		}
		if !a && (!res.IsError || out.ExitCode != 126 || out.Stdout != "" || !errors.Is(statErr, os.ErrNotExist) ||
			!strings.Contains(out.Stderr, "needs approval by rule 0") || !strings.Contains(out.Stderr, "denied by the person")) {
			t.Fatalf("declined: %q %+v (%v)", text(res), out, statErr)
		}
	}
}
