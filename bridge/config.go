package bridge

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
)

// WatchMode selects how the host notices new calls.
type WatchMode string

const (
	// WatchAuto uses filesystem events plus a periodic rescan, and falls
	// back to polling when events cannot be set up.
	WatchAuto WatchMode = "auto"
	// WatchEvents requires filesystem events (plus the periodic rescan).
	WatchEvents WatchMode = "events"
	// WatchPoll scans calls/ every PollInterval and makes wrappers poll.
	WatchPoll WatchMode = "poll"
)

// Limits bound what one session accepts from the sandbox. A message about
// a limit names it by its JSON name ("max_args"), or by the setting
// [Config.LimitKey] returns for that name.
type Limits struct {
	MaxCalls       int           `json:"max_calls"`        // calls per session
	MaxConcurrent  int           `json:"max_concurrent"`   // gates running at once
	MaxArgs        int           `json:"max_args"`         // arguments per call
	MaxArgBytes    int64         `json:"max_arg_bytes"`    // total argument bytes per call
	MaxStdinBytes  int64         `json:"max_stdin_bytes"`  // stdin bytes per call
	MaxOutputBytes int64         `json:"max_output_bytes"` // stdout and stderr bytes per call, each
	GateTimeout    time.Duration `json:"gate_timeout"`     // default run time of a gate
	MaxScanEntries int           `json:"max_scan_entries"` // entries read from calls/ per scan
	// MaxSessionBytes caps the response bytes a session holds at once (the
	// wrapper acknowledges each response and the host then removes it).
	MaxSessionBytes int64 `json:"max_session_bytes"`
	// MaxRecords caps the call records kept in memory and returned in
	// Result.Calls; the rest are only counted (Result.CallsOmitted).
	MaxRecords int `json:"max_records"`
	// MaxRecordBytes caps the argument bytes kept in one record.
	MaxRecordBytes int `json:"max_record_bytes"`
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits { return defaultLimits }

var defaultLimits = Limits{
	MaxCalls:       100_000,
	MaxConcurrent:  16,
	MaxArgs:        4096,
	MaxArgBytes:    1 << 20,
	MaxStdinBytes:  16 << 20,
	MaxOutputBytes: 4 << 20,
	GateTimeout:    60 * time.Second,
	MaxScanEntries: 20_000,

	MaxSessionBytes: 256 << 20,
	MaxRecords:      1000,
	MaxRecordBytes:  4096,
}

func (l Limits) withDefaults() Limits {
	d := defaultLimits
	// A zero or negative field takes the default.
	return Limits{
		MaxCalls:        cmp.Or(max(l.MaxCalls, 0), d.MaxCalls),
		MaxConcurrent:   cmp.Or(max(l.MaxConcurrent, 0), d.MaxConcurrent),
		MaxArgs:         cmp.Or(max(l.MaxArgs, 0), d.MaxArgs),
		MaxArgBytes:     cmp.Or(max(l.MaxArgBytes, 0), d.MaxArgBytes),
		MaxStdinBytes:   cmp.Or(max(l.MaxStdinBytes, 0), d.MaxStdinBytes),
		MaxOutputBytes:  cmp.Or(max(l.MaxOutputBytes, 0), d.MaxOutputBytes),
		GateTimeout:     cmp.Or(max(l.GateTimeout, 0), d.GateTimeout),
		MaxScanEntries:  cmp.Or(max(l.MaxScanEntries, 0), d.MaxScanEntries),
		MaxSessionBytes: cmp.Or(max(l.MaxSessionBytes, 0), d.MaxSessionBytes),
		MaxRecords:      cmp.Or(max(l.MaxRecords, 0), d.MaxRecords),
		MaxRecordBytes:  cmp.Or(max(l.MaxRecordBytes, 0), d.MaxRecordBytes),
	}
}

// Config configures a [Session].
type Config struct {
	// Gates are the gates the sandbox may call. Required.
	Gates *gates.Registry
	// Dir is where session directories are created; "" means
	// [DefaultParent](), private to this user.
	Dir string
	// Limits bound what the sandbox may ask for; zero fields take
	// [DefaultLimits].
	Limits Limits
	// Watch selects how calls are noticed; "" means [WatchAuto].
	Watch WatchMode
	// PollInterval is the scan period in poll mode; 0 means 10ms.
	PollInterval time.Duration
	// RescanInterval is the safety rescan period with events; 0 means 1s.
	RescanInterval time.Duration
	// Keep leaves the session directory in place on Close (debugging).
	Keep bool
	// Audit, when set, receives one JSON line per call attempt and one
	// per command a session runs ([CommandRecord]).
	Audit io.Writer
	// Sandbox names the persistent sandbox the session's commands run in,
	// for the audit log ("" when each has a sandbox of its own).
	Sandbox string
	// Redact, when set, replaces every secret value it knows in what
	// leaves the session: gate output (streamed or not), call records and
	// error texts, the audit log, and the sandboxed command's own output
	// and answer. nil redacts nothing.
	Redact *secrets.Redactor
	// Approve, when set, is asked before every gate runs (see [ApproveFunc]).
	Approve ApproveFunc
	// Logf, when set, receives warnings (e.g. falling back to polling).
	Logf func(format string, args ...any)
	// SubmitLines takes a line "SUBMIT: ANSWER" of the command's stdout as
	// the run's answer ([Result].Answer) when no gate recorded one (no
	// submit call): the last such line, ANSWER without the spaces around
	// it, at most Limits.MaxArgBytes long (a longer line is no answer).
	// The line stays in the output; stderr is not read.
	SubmitLines bool
	// LimitKey, when set, names the setting of a limit in the messages the
	// sandbox and the call records get, given the limit's JSON name in
	// [Limits] ("max_args"): the CLI returns its config key
	// ("bridge.limits.max_args"). Unset, messages name the limit itself.
	LimitKey func(limit string) string
}

// limitKey names limit l: its setting, or l itself.
func (c *Config) limitKey(l string) string {
	if c.LimitKey != nil {
		return c.LimitKey(l)
	}
	return l
}

// limitNote is what a message about limit l adds in parentheses: "limit
// set by bridge.limits.max_args" (or "limit max_args" without LimitKey).
func (c *Config) limitNote(l string) string {
	if c.LimitKey != nil {
		return "limit set by " + c.LimitKey(l)
	}
	return "limit " + l
}

// limitError is e as the sandbox and the records see it, naming the
// setting of its limit.
func (c *Config) limitError(e *mailbox.LimitError) error {
	return &limitError{e, e.What + " (" + c.limitNote(e.Limit) + ")"}
}

type limitError struct {
	e   *mailbox.LimitError
	msg string
}

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return e.e }

// ErrNoGates is returned by [Open] when Config.Gates is nil.
var ErrNoGates = errors.New("bridge: config has no gate registry")

func (c *Config) validate() error {
	if c.Gates == nil {
		return ErrNoGates
	}
	switch c.Watch {
	case "":
		c.Watch = WatchAuto
	case WatchAuto, WatchEvents, WatchPoll:
	default:
		return fmt.Errorf("bridge: watch mode %q: want auto, events or poll", c.Watch)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 10 * time.Millisecond
	}
	if c.RescanInterval <= 0 {
		c.RescanInterval = time.Second
	}
	c.Limits = c.Limits.withDefaults()
	return nil
}
