package mcpserver

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// gateCall is the record of one gate call a command made, in the bash
// tool's structured result: run --json's calls, in the same snake_case
// (docs/json.md). Secrets are redacted (the control plane's records).
type gateCall struct {
	ID   string `json:"id"`
	Gate string `json:"gate" jsonschema:"the gate called; an unknown gate's name as given, U+FFFD for each byte that is not UTF-8"`
	// GateBase64 is the exact bytes of a gate name that is not UTF-8
	// (an unknown gate's), in base64; absent for the others.
	GateBase64 *string  `json:"gate_base64,omitempty" jsonschema:"only when the gate's name is not valid UTF-8: its exact bytes in base64"`
	Args       []string `json:"args" jsonschema:"the arguments (capped: 64 of 256 bytes each); a non-UTF-8 one has U+FFFD for each bad byte"`
	// ArgsBase64 has, for each argument that is not UTF-8, its exact
	// bytes in base64 (null for the others); absent when all are.
	ArgsBase64 []*string `json:"args_base64,omitempty" jsonschema:"only when an argument is not valid UTF-8: per argument its exact bytes in base64, null for the valid ones"`
	ExitCode   int       `json:"exit_code"`
	Decision   string    `json:"decision" jsonschema:"ran, denied, rejected, timed_out, unknown or canceled"`
	DecidedBy  string    `json:"decided_by,omitempty" jsonschema:"who decided a call that needed approval: person, runtime, grant, config, policy, timeout, limit, canceled, no_one"`
	DurationMS float64   `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
}

// gateCalls are recs as the bash tool reports them.
func gateCalls(recs []bridge.CallRecord) []gateCall {
	out := make([]gateCall, 0, len(recs))
	for _, r := range recs {
		c := gateCall{ID: r.ID, Gate: r.Gate, Args: r.Args, ExitCode: r.ExitCode, Decision: string(r.Decision),
			DecidedBy: r.DecidedBy, DurationMS: r.DurationMS, Error: r.Error}
		if b := lossless.Bytes(r.Gate); b != nil {
			e := base64.StdEncoding.EncodeToString(b)
			c.GateBase64 = &e
		}
		if c.Args == nil {
			c.Args = []string{}
		}
		if b := lossless.List(r.Args); b != nil {
			c.ArgsBase64 = make([]*string, len(b))
			for i, x := range b {
				if x != nil {
					e := base64.StdEncoding.EncodeToString(x)
					c.ArgsBase64[i] = &e
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// Bounds of the gate-call lines of a result's text: lines, arguments
// shown per call, bytes shown per argument.
const (
	maxCallLines   = 20
	maxLineArgs    = 8
	maxLineArgSize = 64
)

// gateCallLines says the gate calls in a result's text, one line each
// (at most maxCallLines, then how many more), arguments quoted with
// control characters and non-UTF-8 bytes escaped; "" for none.
func gateCallLines(calls []gateCall, dropped int) string {
	var b strings.Builder
	for i, c := range calls {
		if i == maxCallLines {
			dropped += len(calls) - i
			break
		}
		name := c.Gate // a gate's name is plain; quoted if not
		if len(name) > maxLineArgSize || lossless.Quote(name) != `"`+name+`"` {
			name = lossless.QuoteCap(name, maxLineArgSize)
		}
		b.WriteString("[gate call: " + name)
		for j, a := range c.Args {
			if j == maxLineArgs {
				fmt.Fprintf(&b, " … (%d arguments)", len(c.Args))
				break
			}
			b.WriteString(" " + lossless.QuoteCap(a, maxLineArgSize))
		}
		fmt.Fprintf(&b, " → exit %d", c.ExitCode)
		switch {
		case c.Decision == string(bridge.DecisionDenied) && c.DecidedBy != "":
			fmt.Fprintf(&b, " (denied by %s)", c.DecidedBy)
		case c.Decision == string(bridge.DecisionRan) && c.DecidedBy != "":
			fmt.Fprintf(&b, " (allowed by %s)", c.DecidedBy)
		case c.Decision != string(bridge.DecisionRan) && c.Decision != "":
			fmt.Fprintf(&b, " (%s)", strings.ReplaceAll(c.Decision, "_", " "))
		}
		b.WriteString("]\n")
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "[… %d more gate calls]\n", dropped)
	}
	return b.String()
}
