package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatebridge/gatebridge/bridge/approval"
	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// noOneOverMCP is approvals' NoOne under the MCP server: why a call that
// needs approval is denied at once (the decider's hint then names
// `gatebridge grants add`).
const noOneOverMCP = "no one to ask over MCP: the client did not declare elicitation (elicitation/create), " +
	"or speaks a protocol version (2026-07-28 or later) where this server cannot send it"

// Choices of an elicitation besides the offers' descriptions.
const (
	choiceOnce = "allow this call once"
	choiceDeny = "deny it"
)

// maxShownArg bounds an argument the question shows (as the terminal
// prompt does: quoted, cut, its length said).
const maxShownArg = 120

// maxShownArgs bounds the arguments a question lists.
const maxShownArgs = 32

// elicitor asks the person behind the MCP client about a gate call with
// elicitation/create: an approval.Approver. It is the host's sandbox's
// Approver (control.SandboxSpec.Approver), present only while the
// session's client declared elicitation (else the decider denies at once,
// with approvals' NoOne).
type elicitor struct {
	ss atomic.Pointer[mcp.ServerSession] // the session, once a tool call named it
}

// setSession makes ss the session asked (the first one named wins: a
// host serves one session).
func (e *elicitor) setSession(ss *mcp.ServerSession) {
	if ss != nil {
		e.ss.CompareAndSwap(nil, ss)
	}
}

// Present reports whether the session's client can be asked: it
// declared form elicitation, on a protocol version where the server may
// send elicitation/create during a tool call.
func (e *elicitor) Present() bool {
	ss := e.ss.Load()
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	if c := p.Capabilities.Elicitation; c.Form == nil && c.URL != nil {
		return false // url only: no form to choose in
	}
	// 2026-07-28 forbids server-initiated requests (SEP-2322: input
	// requests in the tool's result instead), which this server does not
	// make yet. Dates compare as strings.
	return p.ProtocolVersion < "2026-07-28"
}

// Ask implements approval.Approver: it sends elicitation/create with the
// gate, its arguments (escaped and cut as the terminal shows them), the
// rule that asks, and the choices (allow once, deny, each offer). Only an
// accepted answer that is exactly one of the choices, and nothing else,
// allows; any other answer denies. ctx's end withdraws the question.
func (e *elicitor) Ask(ctx context.Context, req *approval.Request) (approval.Answer, error) {
	ss := e.ss.Load()
	if ss == nil {
		return approval.Answer{}, fmt.Errorf("%s", noOneOverMCP)
	}
	choices := []string{choiceOnce, choiceDeny}
	offer := map[string]int{} // choice → index in req.Offers
	if req.Command == nil {
		for i := range req.Offers {
			d := req.Offers[i].Describe()
			if _, dup := offer[d]; dup || d == choiceOnce || d == choiceDeny {
				continue
			}
			offer[d] = i
			choices = append(choices, d)
		}
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"choice": map[string]any{"type": "string", "title": "Your answer", "enum": choices},
		},
		"required": []string{"choice"},
	}
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: question(req), RequestedSchema: schema})
	if ctx.Err() != nil {
		return approval.Answer{}, ctx.Err()
	}
	if err != nil {
		return approval.Answer{}, fmt.Errorf("the MCP client did not answer elicitation/create: %v", err)
	}
	deny := func(why string) (approval.Answer, error) {
		return approval.Answer{By: approval.ByPerson, Reason: why}, nil
	}
	if res.Action != "accept" {
		return deny("denied by the person (elicitation: " + lossless.QuoteCap(res.Action, 32) + ")")
	}
	v, ok := res.Content["choice"]
	c, isString := v.(string)
	if !ok || !isString || len(res.Content) != 1 {
		return deny("denied: the MCP client's answer was not one of the choices, and nothing else")
	}
	switch i, isOffer := offer[c]; {
	case c == choiceOnce:
		return approval.Answer{Allow: true, By: approval.ByPerson}, nil
	case c == choiceDeny:
		return deny("denied by the person")
	case isOffer:
		g := req.Offers[i]
		return approval.Answer{Allow: true, Grant: &g, By: approval.ByPerson}, nil
	}
	return deny("denied: the MCP client's answer was not one of the choices")
}

// question is the elicitation's message: the gate (or command), its
// arguments quoted (control characters and non-UTF-8 bytes escaped, long
// ones cut with their length), and the rule that asks.
func question(req *approval.Request) string {
	var b strings.Builder
	if req.Command != nil {
		fmt.Fprintf(&b, "gatebridge: approval needed: command %s\n", cmdpolicy.ShowCommand(req.Command))
		if req.Rule != "" {
			fmt.Fprintf(&b, "  %s\n", req.Rule)
		}
		b.WriteString("Run this command?")
		return b.String()
	}
	n := len(req.Args)
	s := "s"
	if n == 1 {
		s = ""
	}
	fmt.Fprintf(&b, "gatebridge: approval needed: gate %s, %d argument%s\n", lossless.Quote(req.Gate), n, s)
	for i, a := range req.Args {
		if i == maxShownArgs {
			fmt.Fprintf(&b, "  … and %d more arguments\n", n-i)
			break
		}
		shown := lossless.Quote(a)
		if len(a) > maxShownArg {
			shown = fmt.Sprintf("%s (%d bytes)", lossless.QuoteCap(a, maxShownArg), len(a))
		}
		fmt.Fprintf(&b, "  %d: %s\n", i+1, shown)
	}
	if req.Rule != "" {
		fmt.Fprintf(&b, "  asked by %s\n", req.Rule)
	}
	fmt.Fprintf(&b, "Allow %s?", lossless.Quote(req.Gate))
	return b.String()
}

// mcpApprover is the host's sandbox's Approver: the elicitor, through
// control.FromApproval, present only while it is (control.PresentApprover).
type mcpApprover struct {
	control.Approver
	e *elicitor
}

func (a mcpApprover) Present() bool { return a.e.Present() }

var _ control.PresentApprover = mcpApprover{}
