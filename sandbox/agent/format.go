// Package agent carries commands into a long-lived sandbox through a
// directory, the other way round from the gates' mailbox: the host writes
// a command request, a small agent inside the sandbox (`gatebridge
// agent`) starts it and reports its output and exit status in files the
// host reads as hostile input. No docker socket and no exec API are
// involved, so a persistent sandbox costs what a process start costs, and
// a sandbox that shares only a volume with gatebridge (a Kubernetes pod
// with gatebridge as a sidecar) can run commands.
//
// # Layout
//
// One agent serves one directory DIR, seen at the same path or another
// one by the host and the sandbox:
//
//	DIR/req/                 written by the host; read-only to the sandbox
//	  wake                   FIFO: the agent blocks reading it, the host writes a byte
//	  <id>.json              a command ([Request]), renamed into place
//	  <id>.in                FIFO: the command's stdin (when Request.Stdin)
//	  <id>.lease             FIFO the host holds open: EOF means the host is gone
//	  <id>.sig.<n>           signal number n-th sent to the command's process group
//	DIR/out/                 written by the agent (the sandbox): hostile to the host
//	  agent.json             [Hello], written at start, touched every second
//	  <id>.stdout <id>.stderr  the command's output (the command writes them itself)
//	  <id>.exit              decimal exit status (128+N for signal N), renamed into place last
//
// Ids are 32 lowercase hex digits chosen by the host. The host removes a
// command's req/ files when it is done with it; the agent then removes its
// out/ files.
//
// # Trust
//
// The agent trusts the host: it runs what req/ says, as the sandbox's own
// user, with no more rights than any command in the sandbox has. The host
// trusts nothing in out/: every file is opened relative to out/'s fd
// without following links, must be a regular file with one link, is read
// in capped amounts, and what it holds cannot reach another command, a
// gate or the host (see [Conn]). Commands in one sandbox share its user
// with the agent, so one can forge another's result in out/: that is the
// sandbox deceiving itself, and sandboxes of different trust must not
// share one agent. For the same reason a command's request is no secret
// in the sandbox: the agent reads its argv and env from req/ as the
// sandbox's user, and so can every other command there.
package agent

import (
	"strconv"
	"strings"
	"time"
)

// Protocol is the version of this layout, in [Hello].
const Protocol = 1

// Names in DIR, req/ and out/.
const (
	DirReq    = "req"
	DirOut    = "out"
	FileWake  = "wake"
	FileHello = "agent.json"

	extRequest = ".json"
	extScript  = ".sh"
	extStdin   = ".in"
	extLease   = ".lease"
	extSignal  = ".sig."
	extSize    = ".size."
	extStdout  = ".stdout"
	extStderr  = ".stderr"
	extExit    = ".exit"
)

// Request is a command, as the host writes it to req/<id>.json.
type Request struct {
	// Argv is the command; Argv[0] is looked up in Env's PATH.
	Argv []string `json:"argv"`
	// Env is the command's whole environment (KEY=VALUE).
	Env []string `json:"env"`
	// Dir is the working directory, as the sandbox sees it.
	Dir string `json:"dir"`
	// Stdin: the command's stdin is the FIFO req/<id>.in; else /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// TTY runs the command on a pseudo-terminal of this size the agent
	// opens (only when the hello says "tty"): the command's stdin,
	// stdout and stderr, its output all in <id>.stdout; req/<id>.size.<n>
	// ("rows cols") resizes it.
	TTY *TTYSize `json:"tty,omitempty"`
	// Arg0 is the argv[0] the command sees (only when the hello says
	// "arg0"); Argv[0] stays the program run.
	Arg0 string `json:"arg0,omitempty"`
}

// TTYSize is a terminal's size ([Request.TTY]).
type TTYSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Hello is what the agent writes to out/agent.json when it starts.
type Hello struct {
	Protocol int    `json:"protocol"`
	PID      int    `json:"pid"`
	Version  string `json:"version,omitempty"`
	// Path is the agent's own PATH: the image's, for commands' PATH.
	Path string `json:"path,omitempty"`
	// Sh is set by the sh agent ([ShScript]): it runs req/<id>.sh, which
	// the host then writes beside <id>.json.
	Sh bool `json:"sh,omitempty"`
	// TTY and Arg0 are set by an agent that runs [Request.TTY] and
	// [Request.Arg0] (the Go agent); one that does not is never sent them.
	TTY  bool `json:"tty,omitempty"`
	Arg0 bool `json:"arg0,omitempty"`
}

// validID reports whether id is a command id: 32 lowercase hex digits.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseSignalName splits "<id>.sig.<n>" into id and n.
func parseSignalName(name string) (id string, n int, ok bool) { return parseNumbered(name, extSignal) }

// parseSizeName splits "<id>.size.<n>" into id and n.
func parseSizeName(name string) (id string, n int, ok bool) { return parseNumbered(name, extSize) }

// parseNumbered splits "<id><ext><n>" into a valid id and n >= 1.
func parseNumbered(name, ext string) (id string, n int, ok bool) {
	id, rest, found := strings.Cut(name, ext)
	if !found || !validID(id) {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return id, n, true
}

// parseSize parses a size file: "rows cols", each 1..65535.
func parseSize(b []byte) (TTYSize, bool) {
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return TTYSize{}, false
	}
	r, err1 := strconv.ParseUint(f[0], 10, 16)
	c, err2 := strconv.ParseUint(f[1], 10, 16)
	if err1 != nil || err2 != nil || r == 0 || c == 0 {
		return TTYSize{}, false
	}
	return TTYSize{Rows: uint16(r), Cols: uint16(c)}, true
}

// parseExit parses an exit file: a decimal status 0..255 and an optional
// newline.
func parseExit(b []byte) (int, bool) {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" || len(s) > 3 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// DefaultMaxStream caps the bytes read from one command's stdout or stderr
// file: a sparse file costs the sandbox nothing to make and the host a
// read per byte.
const DefaultMaxStream = 4 << 30

// StaleAfter: the agent touches its hello every second; one older than
// this means the agent is gone.
var StaleAfter = 10 * time.Second

// DialOptions configure [Dial].
type DialOptions struct {
	// Wait bounds the wait for the agent's hello; 0 means 10s.
	Wait time.Duration
	// MaxStream caps the bytes read per output stream of a command; 0
	// means [DefaultMaxStream].
	MaxStream int64
}

// Command is one command for [Conn.Run], as the sandbox sees it.
type Command struct {
	Argv []string
	Env  []string
	Dir  string
}

// Options configure [Serve].
type Options struct {
	// Dir is the agent directory (with req/ and out/).
	Dir string
	// Version goes into the hello.
	Version string
	// Logf receives the agent's log lines; nil discards them.
	Logf func(format string, args ...any)
	// Reap makes the agent reap every child that is left to it, as PID 1
	// of a container must (orphans are re-parented to it). It is on when
	// the agent is PID 1.
	Reap bool
	// WaitHost bounds the wait for the host to make req/ (0: forever).
	WaitHost time.Duration
}
