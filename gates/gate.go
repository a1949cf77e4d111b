// Package gates defines the host-side tools ("gates") that a sandboxed
// command can call through the gatebridge mailbox, a registry to hold them,
// and the built-in gates.
//
// # Contract
//
// A [Gate] describes itself with a [Spec] and runs with [Gate.Call]. The
// caller (package bridge) owns the mailbox: a gate never sees call files,
// only decoded arguments, the stdin bytes the wrapper sent, and two writers
// that are already capped. A gate reports its outcome as an exit code and an
// error:
//
//   - (code, nil): the gate ran; code is the wrapper's exit status.
//   - (_, err) with err an [*ExitError]: exit with err.Code, message on stderr.
//   - (_, err) wrapping [ErrDenied]: exit 126 (path escapes, policy).
//   - (_, err) wrapping [ErrUsage]: exit 2.
//   - any other error: exit 1 with "gatebridge: NAME: ERR" on stderr.
//
// ctx carries the gate's timeout; a gate must return soon after ctx is done.
// The caller turns an expired deadline into exit 124 and a panic into exit 1.
//
// # Built-in gates
//
// [Builtins] and [RegisterBuiltins] provide read_file, list_dir, search,
// write_file (only with [Options.WritableRoot]), submit and gb_echo. They
// share one argument syntax: "--opt N" or "--opt=N", options anywhere, "--"
// ends options; submit and gb_echo take every argument literally. File
// gates reach the workspace only through [os.Root]: "..", absolute paths
// outside the workspace and symlinks leading out are denied (exit 126), and
// FIFOs, devices and sockets are refused without blocking. See [Options]
// for the path rules.
//
// # Conventions for every gate
//
// Before a gate runs, its caller (the bridge's dispatcher) applies two
// conventions to the arguments, for every kind of gate: "--help" or "-h"
// alone prints the usage ([WantsHelp], [WriteHelp]; a [HelpOwner] takes
// it itself), and one JSON object whose keys are all names of the gate's
// [Param]s becomes the words of its usage line ([ParamArgs]; not for
// [Spec.RawArgs] gates). Approval and policy see those words.
//
// # Command gates
//
// [NewCommand] builds a gate that runs an allowlisted host command without
// a shell, in its own process group, with capped output (see [CommandSpec]).
//
// # Kinds
//
// A configuration declares gates by [Kind]: builtin and command are this
// package's; other packages register theirs (gates/mcptools: mcp). A
// program holds the kinds it offers in a [KindRegistry] and builds each
// configured source of gates with [Kind.Add], which applies the kind's
// [ClashPolicy]. [Env] is what the gates need from the host: the
// workspace, where the sandbox writes, and an [Isolator] for programs.
package gates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// Exit codes shared by wrappers, gates and the bridge (see README "Exit codes").
const (
	ExitOK      = 0
	ExitFailure = 1   // the gate failed
	ExitUsage   = 2   // bad arguments
	ExitTimeout = 124 // the gate or the wait for the host timed out
	ExitDenied  = 126 // refused by policy (path outside the root, limit, …)
	ExitUnknown = 127 // no such gate
)

var (
	// ErrDenied marks a request refused by policy; it maps to exit 126.
	ErrDenied = errors.New("denied")
	// ErrUsage marks bad arguments; it maps to exit 2.
	ErrUsage = errors.New("usage")
)

// ExitError carries an explicit exit code and a message for stderr.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Deniedf returns an [*ExitError] with code 126 whose message is the
// formatted text alone; it matches [ErrDenied] with errors.Is.
func Deniedf(format string, a ...any) error {
	return &ExitError{Code: ExitDenied, Err: &markedError{fmt.Errorf(format, a...), ErrDenied}}
}

// Usagef returns an [*ExitError] with code 2 whose message is the formatted
// text alone; it matches [ErrUsage] with errors.Is.
func Usagef(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Err: &markedError{fmt.Errorf(format, a...), ErrUsage}}
}

// markedError has err's message and matches both err and mark.
type markedError struct{ err, mark error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.mark} }

// StdinMode says when the wrapper forwards its standard input to the gate
// (the mailbox format defines it; these names are for gate authors).
type StdinMode = mailbox.StdinMode

const (
	// StdinNone: the gate never reads stdin (the default).
	StdinNone = mailbox.StdinNone
	// StdinIfNoArgs: stdin is sent only when the gate is called with no
	// arguments (submit, gb_echo), so `while read f; do submit x; done < list`
	// does not swallow the loop's input.
	StdinIfNoArgs = mailbox.StdinIfNoArgs
	// StdinAlways: stdin is always sent (write_file).
	StdinAlways = mailbox.StdinAlways
	// StdinIfAtDash: stdin is sent only when an argument is exactly "@-"
	// (the http gate's --data-binary @-).
	StdinIfAtDash = mailbox.StdinIfAtDash
)

// Param documents one parameter of a gate, for humans and for models. Its
// Name is the key of the parameter in the gate's JSON Schema ([SchemaOf])
// and in a JSON object argument ([ParamArgs]).
type Param struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	Variadic    bool   `json:"variadic,omitempty"`
	// Flag marks an option such as --limit N: written "--NAME VALUE", or
	// as Name itself when Name starts with "-" ("-n", "--max-count": a
	// command gate's options). See [Param.Option].
	Flag bool `json:"flag,omitempty"`
	// Type is the JSON Schema type of the value: "" (a string),
	// "integer", "number", "boolean", "array" or "object". A boolean flag
	// is an option without a value, given when true.
	Type string `json:"type,omitempty"`
}

// Option is how p is written on a command line: "--offset" for a flag
// named offset, the name itself for one named "-n" or "--max-count", ""
// for a positional parameter.
func (p Param) Option() string {
	switch {
	case !p.Flag:
		return ""
	case strings.HasPrefix(p.Name, "-"):
		return p.Name
	}
	return "--" + p.Name
}

// Spec describes a gate.
type Spec struct {
	Name    string        `json:"name"`
	Summary string        `json:"summary"` // one line
	Usage   string        `json:"usage"`   // e.g. "read_file [--offset N] [--limit N] PATH"
	Params  []Param       `json:"params"`
	Stdin   StdinMode     `json:"stdin"`
	Timeout time.Duration `json:"-"` // 0: the session's default gate timeout
	// RawArgs says the gate takes its arguments as they are: one JSON
	// object argument is not turned into its parameters ([ParamArgs]).
	// submit and gb_echo take it as data; an MCP tool reads it itself.
	RawArgs bool `json:"-"`
	// DashDash says the gate reads "--" as the end of its options (the
	// built-in gates, command gates with args/options rules): [ParamArgs]
	// then puts it before a positional value that starts with "-".
	DashDash bool `json:"-"`
}

// Call is one invocation of a gate.
type Call struct {
	// SessionID and ID identify the call (for logs; never use them as paths).
	SessionID string
	ID        string
	// Args are the arguments after the gate name, byte for byte.
	Args []string
	// Stdin is what the wrapper forwarded; nil when nothing was sent.
	Stdin []byte
	// Cwd is the caller's working directory as the sandbox sees it, as
	// the caller sent it (untrusted); "" when unknown. The file gates
	// resolve relative paths against it when it lies in their tree.
	Cwd string
	// Stdout and Stderr are capped by the caller; writes past the cap are
	// dropped and reported to the sandbox. What a gate writes reaches a
	// transport that can stream as it is written; others get it when the
	// gate returns.
	Stdout io.Writer
	Stderr io.Writer
	// Results receives what a gate reports for the session as a whole
	// rather than for its caller (submit's answer). It may be nil outside a
	// session; gates must check.
	Results Results
	// Audit, when set, records what the gate did on the host that its
	// output does not show (each request an http gate sends): the caller
	// keeps each event, redacted, in the call's record and audit line. An
	// event must marshal to a JSON object. It may be nil; gates must check.
	Audit func(event any)
}

// Results is a session's result sink (see [Call.Results]).
type Results interface {
	// SetResult records value under key, replacing an earlier one.
	SetResult(key, value string)
}

// ResultAnswer is the key under which submit records the session's answer.
const ResultAnswer = "answer"

// Closer is implemented by gates that hold resources (a connection, a
// server process): [Registry.Close] and [Registry.Unregister] call it.
type Closer interface {
	Close() error
}

// Schemer is implemented by gates whose parameters have a JSON Schema
// (tools of MCP servers, gates registered over the protocol).
type Schemer interface {
	InputSchema() json.RawMessage
}

// Approver is implemented by gates that must be approved before each call
// (tools of an MCP server configured with approval: ask): a transport with
// someone to ask asks (serve: approval/request); others refuse the call.
type Approver interface {
	NeedsApproval() bool
}

// Approval settings of a gate (approval: in the config): run without
// asking, ask before each call, or refuse every call.
const (
	ApprovalNever = "never"
	ApprovalAsk   = "ask"
	ApprovalDeny  = "deny"
)

// ApprovalSetter is implemented by gates whose own config says how their
// calls are approved (an MCP tool: its server's approval or its
// tool_approval entry): one of ApprovalNever, ApprovalAsk, ApprovalDeny.
// It supersedes [Approver] where both are implemented.
type ApprovalSetter interface {
	ApprovalSetting() string
}

// ArgChecker is implemented by gates with an argument policy (command
// gates): CheckArgs says whether args pass it, with the error the call
// would get (wrapping [ErrDenied] or [ErrUsage]). Approval uses it so
// that nothing a person or a grant allows can go past the policy.
type ArgChecker interface {
	CheckArgs(args []string) error
}

// ArgPatterner is implemented by gates whose policy has a pattern for
// each argument (command gates): for args that pass the policy it returns
// one anchored RE2 expression per argument, each within the policy (an
// option name as itself, an option's value or a positional argument as
// its rule's pattern), or nil. A grant offered from them allows no more
// than the policy does.
type ArgPatterner interface {
	ArgPatterns(args []string) []string
}

// Gate is a host-side tool callable from the sandbox. It does not know its
// transport: the same gate answers a wrapper, a protocol client or an MCP
// host.
type Gate interface {
	// Spec describes the gate. It must return the same value every time.
	Spec() Spec
	// Call runs the gate once. It may be called concurrently. ctx is
	// cancelled at the gate's timeout, when the command's run ends, and when
	// the caller goes away (its wrapper was killed); a gate must return soon
	// after.
	Call(ctx context.Context, c *Call) (exitCode int, err error)
}

// Func adapts a Go function to a [Gate].
//
//	reg.Register(gates.Func(gates.Spec{Name: "weather", Summary: "…"},
//		func(ctx context.Context, c *gates.Call) (int, error) {
//			fmt.Fprintln(c.Stdout, "sunny")
//			return 0, nil
//		}))
func Func(spec Spec, fn func(ctx context.Context, c *Call) (int, error)) Gate {
	return &funcGate{spec: spec, fn: fn}
}

type funcGate struct {
	spec Spec
	fn   func(ctx context.Context, c *Call) (int, error)
}

var _ Gate = (*funcGate)(nil)

func (g *funcGate) Spec() Spec { return g.spec }
func (g *funcGate) Call(ctx context.Context, c *Call) (int, error) {
	return g.fn(ctx, c)
}

// ExitCodeOf maps a gate's (code, err) to the wrapper's exit status.
func ExitCodeOf(code int, err error) int {
	if err == nil {
		return code
	}
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, ErrDenied):
		return ExitDenied
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	default:
		return ExitFailure
	}
}
