package mailbox

import (
	"fmt"
	"path/filepath"
)

// Directories of a session.
const (
	DirBin       = "bin"
	DirCalls     = "calls"
	DirResponses = "responses"
	DirTmp       = "tmp"
)

// Files of one call under calls/<id>/, and of its answer under responses/.
const (
	FileArgv  = "argv"  // v2: NUL-ended working directory, gate name, arguments
	DirArgs   = "args"  // v1: one file per argument
	FileGate  = "gate"  // v1: the gate name
	FileStdin = "stdin" // optional
	FileWake  = "wake"  // optional FIFO
	FileReady = "ready" // empty, written last: the call exists once it does
	// FileCancel is created by a wrapper that was stopped by a signal
	// (INT, TERM, HUP, PIPE) while it waited: the host cancels the gate.
	FileCancel = "cancel"

	ExtStdout = ".stdout"
	ExtStderr = ".stderr"
	ExtExit   = ".exit"
	// ExtStream names responses/<id>.stream: the output of a call that
	// runs long, written while its gate runs, in the inline answer's line
	// format (o, O, e, E lines). A v2 client follows it while it waits (it
	// is woken through the FIFO after each append) and reads it to its end
	// once the exit file exists; the exit file then holds only what was
	// not streamed.
	ExtStream = ".stream"
	// AckSuffix names calls/<id>.done, which the wrapper creates once it
	// has printed the answer of call <id>.
	AckSuffix = ".done"
	// FileLease is the FIFO in a session root that a long-lived sandbox
	// (docker) holds open while it lives.
	FileLease = "lease"
)

// SlotPrefix starts the names of call slots: call directories the host
// prepares in calls/ (with their wake FIFO) so that a wrapper claims one
// by creating its argv file with an exclusive-create redirection (set -C)
// instead of running mkdir and mkfifo. A slot is a v2 call directory like
// any other once claimed; the host treats it as hostile like any other.
const SlotPrefix = "_"

// MaxCwdLen is the longest working directory a call may send (PATH_MAX).
const MaxCwdLen = 4096

// Inline-answer line prefixes (see the package doc).
const (
	LineStdout        = 'o'
	LineStdoutPartial = 'O'
	LineStderr        = 'e'
	LineStderrPartial = 'E'
	ModeInline        = "i"
	ModeFiles         = "f"
)

// Session directory names in a sessions parent.
const (
	SessionPrefix = "gb-"
	LockSuffix    = ".lock" // flock held by the owning gatebridge
	KeptSuffix    = ".kept" // a kept session, left for a human, never pruned
)

// Layout holds the paths of one session, as the host or the sandbox sees
// them.
type Layout struct {
	Root      string // the session directory itself
	Bin       string // wrappers: read-only inside
	Calls     string // written by the sandbox
	Responses string // written by the host: read-only inside
	Tmp       string // scratch: writable inside
}

// LayoutAt returns the layout of a session rooted at root.
func LayoutAt(root string) Layout {
	return Layout{
		Root:      root,
		Bin:       filepath.Join(root, DirBin),
		Calls:     filepath.Join(root, DirCalls),
		Responses: filepath.Join(root, DirResponses),
		Tmp:       filepath.Join(root, DirTmp),
	}
}

// Environment a session gives the sandboxed command.
const (
	EnvCallsDir     = "GATEBRIDGE_CALLS_DIR"
	EnvResponsesDir = "GATEBRIDGE_RESPONSES_DIR"
	EnvSessionDir   = "GATEBRIDGE_SESSION_DIR"
	EnvSessionID    = "GATEBRIDGE_SESSION_ID"
	EnvWake         = "GATEBRIDGE_WAKE"         // WakeFIFO (default) or WakePoll
	EnvWaitTimeout  = "GATEBRIDGE_WAIT_TIMEOUT" // seconds of host silence a wrapper waits; 0 = forever
	EnvWakeCheck    = "GATEBRIDGE_WAKE_CHECK"   // seconds between re-checks while blocked on the FIFO
)

// Wake modes: how a wrapper waits for its answer.
const (
	WakeFIFO = "fifo" // block on calls/<id>/wake
	WakePoll = "poll" // poll for responses/<id>.exit (FIFOs do not cross Docker Desktop's VM)
)

// StdinMode says when a wrapper forwards its standard input. Stdin is never
// read when it is a terminal.
type StdinMode int

const (
	// StdinNone: the gate never reads stdin (the default).
	StdinNone StdinMode = iota
	// StdinIfNoArgs: stdin is sent only when the gate is called with no
	// arguments, so `while read f; do submit x; done < list` does not
	// swallow the loop's input.
	StdinIfNoArgs
	// StdinAlways: stdin is always sent.
	StdinAlways
	// StdinIfAtDash: stdin is sent only when one of the arguments is
	// exactly "@-" (curl's "the data comes from stdin": the http gate's
	// --data-binary @-), so that a call without it neither waits for an
	// open stdin nor swallows a loop's input.
	StdinIfAtDash
)

// String returns "none", "if-no-args", "always" or "if-at-dash".
func (m StdinMode) String() string {
	switch m {
	case StdinIfNoArgs:
		return "if-no-args"
	case StdinAlways:
		return "always"
	case StdinIfAtDash:
		return "if-at-dash"
	default:
		return "none"
	}
}

// MarshalText implements encoding.TextMarshaler.
func (m StdinMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText accepts the names String returns.
func (m *StdinMode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "none", "":
		*m = StdinNone
	case "if-no-args":
		*m = StdinIfNoArgs
	case "always":
		*m = StdinAlways
	case "if-at-dash":
		*m = StdinIfAtDash
	default:
		return fmt.Errorf("stdin mode %q: want none, if-no-args, always or if-at-dash", b)
	}
	return nil
}
