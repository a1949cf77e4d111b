package rpc

import (
	"encoding/json"

	"github.com/gatebridge/gatebridge/bridge/cmdpolicy"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/lossless"
)

// ProtocolVersion is the version of the protocol this server speaks.
const ProtocolVersion = 1

// SupportedVersions are the protocol versions initialize accepts.
var SupportedVersions = []int{ProtocolVersion}

// Method names.
const (
	MethodInitialize        = "initialize"
	MethodInitialized       = "initialized" // notification
	MethodSandboxOpen       = "sandbox/open"
	MethodSandboxClose      = "sandbox/close"
	MethodGateRegister      = "gate/register"
	MethodGateUnregister    = "gate/unregister"
	MethodGateList          = "gate/list"
	MethodProcessStart      = "process/start"
	MethodProcessWrite      = "process/write"
	MethodProcessCloseStdin = "process/closeStdin"
	MethodProcessSignal     = "process/signal"
	MethodProcessResize     = "process/resize"
	MethodProcessWait       = "process/wait"
	MethodProcessRead       = "process/read"
	MethodProcessSnapshot   = "process/snapshot"
	MethodProcessList       = "process/list"
	MethodFsRead            = "fs/read"
	MethodFsWrite           = "fs/write"
	MethodFsList            = "fs/list"
	MethodFsStat            = "fs/stat"
	MethodFsRemove          = "fs/remove"
	MethodFsMkdir           = "fs/mkdir"
	MethodFsRename          = "fs/rename"

	// Server → client notifications.
	MethodProcessOutput   = "process/output"
	MethodProcessExited   = "process/exited"
	MethodProcessGateCall = "process/gateCall" // with process/start's reportGateCalls
	// Server → client requests, and the client's notifications about them.
	MethodGateCall        = "gate/call"
	MethodGateOutput      = "gate/output" // client → server notification
	MethodApprovalRequest = "approval/request"
	MethodCancelRequest   = "$/cancelRequest"
)

// JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// Server errors (-32000 … -32099).
	CodeNotInitialized = -32002 // a request before initialize
	CodeNotFound       = -32001 // no such sandbox, process or gate
	CodeLimit          = -32003 // a per-connection cap was reached
	CodeUnavailable    = -32004 // the backend cannot run here
	CodeConflict       = -32005 // the id is already in use
	CodeUnauthorized   = -32006 // serve --listen: the first message is not initialize with the token
	CodePolicyDenied   = -32007 // process/start refused by the command policy (data: cmdpolicy.ErrorData)
)

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method, no ID) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Hint is the "hint" of Data, a string in a map (as the server sends it,
// or as a [Client] decodes it), or "": an Error is a hint carrier
// (package internal/hint).
func (e *Error) Hint() string {
	switch d := e.Data.(type) {
	case map[string]string:
		return d["hint"]
	case map[string]any:
		h, _ := d["hint"].(string)
		return h
	case cmdpolicy.ErrorData:
		return d.Hint
	}
	return ""
}

// InitializeParams are the params of initialize.
type InitializeParams struct {
	ClientName      string `json:"clientName"`
	ProtocolVersion int    `json:"protocolVersion"`
	// AuthToken is the server's token on a network connection
	// ([ServeListener]), which checks it before the connection exists;
	// Serve itself never reads it (a stdio client needs none).
	AuthToken string `json:"authToken,omitempty"`
}

// InitializeResult is initialize's result.
type InitializeResult struct {
	ProtocolVersion int    `json:"protocolVersion"`
	ServerVersion   string `json:"serverVersion"`
	// Backends are the sandbox backends this server offers (usable or
	// not; sandbox/open says why one cannot run).
	Backends []BackendInfo `json:"backends"`
	// Limits are the per-connection caps.
	Limits ConnLimits `json:"limits"`
}

// BackendInfo describes one backend in InitializeResult.
type BackendInfo struct {
	Name     string `json:"name"`
	Summary  string `json:"summary"`
	Isolates string `json:"isolates"`
}

// ConnLimits are the caps of one connection.
type ConnLimits struct {
	MaxMessageBytes   int   `json:"maxMessageBytes"`
	MaxSandboxes      int   `json:"maxSandboxes"`
	MaxProcesses      int   `json:"maxProcesses"`
	MaxPendingCalls   int   `json:"maxPendingGateCalls"`
	MaxRetainedBytes  int64 `json:"maxRetainedBytes"`          // per stream: the snapshot's head + tail together
	MaxReplayBytes    int64 `json:"maxReplayBytes"`            // per process, for process/read
	DefaultTimeoutMs  int64 `json:"defaultTimeoutMs"`          // process/start without timeoutMs (0: none)
	GateTimeoutMs     int64 `json:"gateTimeoutMs"`             // gate/call deadline without timeoutMs
	ApprovalTimeoutMs int64 `json:"approvalTimeoutMs"`         // approval/request deadline
	MaxCommandBytes   int64 `json:"maxCommandBytes,omitempty"` // process/start's argv, each word and its NUL (sandbox.max_command_bytes)
	MaxCommands       int   `json:"maxCommands,omitempty"`     // processes one sandbox starts (sandbox.max_commands; 0: no limit)
	MaxFsChunkBytes   int64 `json:"maxFsChunkBytes"`           // one fs/read's data, one fs/write's data
	MaxFsFileBytes    int64 `json:"maxFsFileBytes"`            // a file's size after fs/write
	MaxGateCalls      int   `json:"maxGateCalls"`              // gate-call records in one process/exited
}

// SandboxOpenParams are the params of sandbox/open.
type SandboxOpenParams struct {
	SandboxID         string `json:"sandboxId"`
	Backend           string `json:"backend,omitempty"` // "auto" (default), "local", "bwrap", "docker"
	Workspace         string `json:"workspace"`
	WritableWorkspace bool   `json:"writableWorkspace,omitempty"`
	Image             string `json:"image,omitempty"` // a backend that runs images (docker)
	// Runtime is the OCI runtime to run the sandbox with (runsc, runc, …;
	// a backend that has them: docker): one the engine has registered,
	// else the error names those it has.
	Runtime string            `json:"runtime,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// SandboxOpenResult is sandbox/open's result.
type SandboxOpenResult struct {
	SandboxID string `json:"sandboxId"`
	Backend   string `json:"backend"`
	// Reason says why auto chose this backend.
	Reason string `json:"reason,omitempty"`
	// WorkspaceInside is where commands see the workspace.
	WorkspaceInside string `json:"workspaceInside"`
}

// SandboxCloseParams are the params of sandbox/close.
type SandboxCloseParams struct {
	SandboxID string `json:"sandboxId"`
}

// GateRegisterParams are the params of gate/register.
type GateRegisterParams struct {
	Name        string          `json:"name"`
	Summary     string          `json:"summary"`
	Usage       string          `json:"usage,omitempty"` // default: name and params
	Params      []gates.Param   `json:"params,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Stdin       string          `json:"stdin,omitempty"` // "if-no-args" (default), "none", "always", "if-at-dash"
	TimeoutMs   int64           `json:"timeoutMs,omitempty"`
	Approval    bool            `json:"approval,omitempty"`
}

// GateUnregisterParams are the params of gate/unregister.
type GateUnregisterParams struct {
	Name string `json:"name"`
}

// GateDoc is one gate in gate/list's result (the same JSON as `gatebridge
// gates --format json`, with the kind "runtime" for registered gates).
type GateDoc struct {
	Name        string          `json:"name"`
	Summary     string          `json:"summary"`
	Usage       string          `json:"usage"`
	Params      []gates.Param   `json:"params"`
	Stdin       string          `json:"stdin"`
	Kind        string          `json:"kind"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// ProcessStartParams are the params of process/start.
type ProcessStartParams struct {
	ProcessID string            `json:"processId"`
	SandboxID string            `json:"sandboxId"`
	Argv      []string          `json:"argv"`
	Cwd       string            `json:"cwd,omitempty"` // relative to the workspace, or absolute inside it
	Env       map[string]string `json:"env,omitempty"`
	Stdin     bool              `json:"stdin,omitempty"` // false: stdin is /dev/null
	TimeoutMs int64             `json:"timeoutMs,omitempty"`
	// ReportGateCalls asks for a process/gateCall notification per gate
	// call the command makes (process/exited lists them either way).
	ReportGateCalls bool     `json:"reportGateCalls,omitempty"`
	TTY             *TTYSize `json:"tty,omitempty"`  // run on a pseudo-terminal of this size
	Arg0            string   `json:"arg0,omitempty"` // the argv[0] the command sees
}

// TTYSize is a terminal's size in character cells.
type TTYSize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// ProcessResizeParams are the params of process/resize.
type ProcessResizeParams struct {
	ProcessID string `json:"processId"`
	Rows      int    `json:"rows"`
	Cols      int    `json:"cols"`
}

// ProcessIDParams name one process.
type ProcessIDParams struct {
	ProcessID string `json:"processId"`
}

// ProcessStartResult is process/start's result.
type ProcessStartResult = ProcessIDParams

// ProcessWriteParams are the params of process/write.
type ProcessWriteParams struct {
	ProcessID string `json:"processId"`
	Chunk     []byte `json:"chunk"` // base64
}

// ProcessSignalParams are the params of process/signal.
type ProcessSignalParams struct {
	ProcessID string `json:"processId"`
	Signal    string `json:"signal"` // "INT", "TERM", "KILL", "HUP"
}

// ProcessWaitParams are the params of process/wait.
type ProcessWaitParams struct {
	ProcessID string `json:"processId"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"` // 0: wait until it exits
}

// ProcessWaitResult is process/wait's result.
type ProcessWaitResult struct {
	ExitCode *int   `json:"exitCode"` // null while running
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut"` // the process's own timeout (timeoutMs) stopped it
	Running  bool   `json:"running"`  // still running when the wait's timeoutMs passed
}

// ProcessReadParams are the params of process/read.
type ProcessReadParams struct {
	ProcessID string `json:"processId"`
	AfterSeq  int64  `json:"afterSeq,omitempty"` // 0: from the first chunk retained
	MaxBytes  int64  `json:"maxBytes,omitempty"`
	WaitMs    int64  `json:"waitMs,omitempty"`
}

// Chunk is one piece of a process's output.
type Chunk struct {
	Seq    int64  `json:"seq"`
	Stream string `json:"stream"` // "stdout" or "stderr"
	Chunk  []byte `json:"chunk"`  // base64
}

// ProcessReadResult is process/read's result.
type ProcessReadResult struct {
	Chunks   []Chunk `json:"chunks"`
	Exited   bool    `json:"exited"`
	ExitCode *int    `json:"exitCode"`
	// FirstSeq is the oldest chunk still retained; chunks before it were
	// dropped (the replay buffer is capped).
	FirstSeq int64 `json:"firstSeq"`
	// NextSeq is the seq the next chunk will get.
	NextSeq int64 `json:"nextSeq"`
}

// ProcessSnapshotResult is process/snapshot's result.
type ProcessSnapshotResult struct {
	Stdout       []byte `json:"stdout"` // base64, head + tail
	Stderr       []byte `json:"stderr"`
	Truncated    bool   `json:"truncated"`
	OmittedBytes int64  `json:"omittedBytes"`
	ExitCode     *int   `json:"exitCode"`
	Running      bool   `json:"running"`
}

// ProcessInfo is one entry of process/list.
type ProcessInfo struct {
	ProcessID string   `json:"processId"`
	SandboxID string   `json:"sandboxId"`
	Argv      []string `json:"argv"`
	Running   bool     `json:"running"`
	ExitCode  *int     `json:"exitCode"`
}

// ProcessListResult is process/list's result.
type ProcessListResult struct {
	Processes []ProcessInfo `json:"processes"`
}

// ProcessOutputParams are the params of the process/output notification.
type ProcessOutputParams struct {
	ProcessID string `json:"processId"`
	Seq       int64  `json:"seq"`
	Stream    string `json:"stream"`
	Chunk     []byte `json:"chunk"`
}

// ProcessExitedParams are the params of the process/exited notification.
type ProcessExitedParams struct {
	ProcessID string `json:"processId"`
	ExitCode  int    `json:"exitCode"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timedOut"`
	// Answer is what the command passed to submit (the last call), if it
	// called it, else its last stdout line "SUBMIT: ANSWER" when the
	// server takes such lines (bridge.Config.SubmitLines); AnswerBase64 holds its bytes when they are not UTF-8
	// (docs/json.md).
	Answer       *string `json:"answer,omitempty"`
	AnswerBase64 []byte  `json:"answerBase64,omitempty"`
	// GateCalls are the gate calls the command made, in order (the first
	// limits.maxGateCalls); GateCallsDropped counts the others.
	GateCalls        []GateCallReport `json:"gateCalls"`
	GateCallsDropped int              `json:"gateCallsDropped,omitempty"`
}

// GateCallReport is one gate call a process's command made, as `run
// --json` lists it in calls (camelCase): the gate, its arguments (secret
// values redacted; argsBase64 for those not UTF-8), the exit code, the
// decision and who decided, and what the gate did on the host (events).
type GateCallReport struct {
	CallID        string            `json:"callId"`
	Gate          string            `json:"gate"`
	GateBase64    []byte            `json:"gateBase64,omitempty"`
	Args          []string          `json:"args"`
	ArgsBase64    [][]byte          `json:"argsBase64,omitempty"`
	ExitCode      int               `json:"exitCode"`
	Decision      string            `json:"decision"`
	DecidedBy     string            `json:"decidedBy,omitempty"`
	DurationMs    float64           `json:"durationMs"`
	BytesIn       int64             `json:"bytesIn"`
	BytesOut      int64             `json:"bytesOut"`
	Error         string            `json:"error,omitempty"`
	Events        []json.RawMessage `json:"events,omitempty"`
	EventsOmitted int               `json:"eventsOmitted,omitempty"`
}

// ExactArgs are the arguments with their exact bytes.
func (r *GateCallReport) ExactArgs() ([]string, error) { return lossless.Strings(r.Args, r.ArgsBase64) }

// ExactGate is the gate's name with its exact bytes (an unknown gate's
// may be any).
func (r *GateCallReport) ExactGate() string { return lossless.String(r.Gate, r.GateBase64) }

// ProcessGateCallParams are the params of the process/gateCall
// notification: one gate call of a process started with reportGateCalls,
// sent once the call is answered (before process/exited).
type ProcessGateCallParams struct {
	ProcessID string         `json:"processId"`
	Call      GateCallReport `json:"call"`
}

// ExactAnswer is the answer with its exact bytes (nil: none).
func (p *ProcessExitedParams) ExactAnswer() *string {
	if p.Answer == nil {
		return nil
	}
	a := lossless.String(*p.Answer, p.AnswerBase64)
	return &a
}

// GateCallParams are the params of the gate/call request (server → client).
//
// Args and Cwd come from the sandbox and may be any bytes: on the wire an
// argument (or the cwd) that is not UTF-8 has its exact bytes in
// ArgsBase64 (CwdBase64), the one rule of docs/json.md; ExactArgs and
// ExactCwd decode it.
type GateCallParams struct {
	CallID     string   `json:"callId"`
	Gate       string   `json:"gate"`
	Args       []string `json:"args"`
	ArgsBase64 [][]byte `json:"argsBase64,omitempty"`
	Stdin      []byte   `json:"stdin"` // base64; null when none was sent
	Cwd        string   `json:"cwd"`
	CwdBase64  []byte   `json:"cwdBase64,omitempty"`
	ProcessID  string   `json:"processId"`
	SandboxID  string   `json:"sandboxId"`
	DeadlineMs int64    `json:"deadlineMs"` // Unix time in ms by which to answer
}

// ExactArgs are the caller's arguments byte for byte.
func (p *GateCallParams) ExactArgs() ([]string, error) { return lossless.Strings(p.Args, p.ArgsBase64) }

// ExactCwd is the caller's working directory byte for byte.
func (p *GateCallParams) ExactCwd() string { return lossless.String(p.Cwd, p.CwdBase64) }

// GateCallResult is the client's answer to gate/call.
type GateCallResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   []byte `json:"stdout,omitempty"` // base64
	Stderr   []byte `json:"stderr,omitempty"`
}

// GateOutputParams are the params of the gate/output notification
// (client → server), streaming output of a gate/call not yet answered.
type GateOutputParams struct {
	CallID string `json:"callId"`
	Stream string `json:"stream"` // "stdout" or "stderr"
	Chunk  []byte `json:"chunk"`
}

// ApprovalRequestParams are the params of approval/request (server →
// client).
// Args are the caller's, as in [GateCallParams].
type ApprovalRequestParams struct {
	CallID     string   `json:"callId"`
	Gate       string   `json:"gate"`
	Args       []string `json:"args"`
	ArgsBase64 [][]byte `json:"argsBase64,omitempty"`
	SandboxID  string   `json:"sandboxId"`
	ProcessID  string   `json:"processId"`
	// Offers are the grants the answer may give besides this call,
	// narrowest first (absent from an older server).
	Offers []ApprovalGrant `json:"offers,omitempty"`
	// Rule, when the command policy (policy.commands) is what asks, says
	// which rule (or default, or unknown).
	Rule string `json:"rule,omitempty"`
	// Command, when set, is a command the command policy asks about
	// before it starts (gate is then "", args [] and offers absent):
	// allow or deny it; nothing is kept.
	Command       []string `json:"command,omitempty"`
	CommandBase64 [][]byte `json:"commandBase64,omitempty"`
}

// ApprovalGrant is a grant in approval/request's offers and in an
// answer's grant: the gate, a scope, a lifetime, an optional expiry.
type ApprovalGrant struct {
	Gate string `json:"gate"`
	// Scope is "exact" (Exact, ExactBase64), "patterns" (Patterns) or
	// "any" (whatever the gate's policy allows).
	Scope       string   `json:"scope"`
	Exact       []string `json:"exact,omitempty"`
	ExactBase64 [][]byte `json:"exactBase64,omitempty"`
	Patterns    []string `json:"patterns,omitempty"`
	// Lifetime is "session", "workspace" or "always".
	Lifetime  string `json:"lifetime"`
	Workspace string `json:"workspace,omitempty"`
	// ExpiresMs, when set, is the Unix time in milliseconds it ends.
	ExpiresMs int64 `json:"expiresMs,omitempty"`
	// Description says in words what it allows (offers; ignored in an
	// answer).
	Description string `json:"description,omitempty"`
}

// Grant scopes.
const (
	ScopeExact    = "exact"
	ScopePatterns = "patterns"
	ScopeAny      = "any"
)

// ExactArgs are the caller's arguments byte for byte.
func (p *ApprovalRequestParams) ExactArgs() ([]string, error) {
	return lossless.Strings(p.Args, p.ArgsBase64)
}

// Approval decisions.
const (
	DecisionAllow           = "allow"
	DecisionDeny            = "deny"
	DecisionAllowForSession = "allowForSession"
)

// ApprovalResult is the client's answer to approval/request.
type ApprovalResult struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"` // shown to the caller on deny
	// Grant, with allow, is a grant to keep (one of the offers, or one
	// of the client's making for this gate): a session grant for the
	// sandbox's life, a workspace or always grant in the server's grants
	// file, as the person's own.
	Grant *ApprovalGrant `json:"grant,omitempty"`
	// ConnectionOnly keeps Grant for the sandbox's life only, whatever
	// its lifetime: nothing is written to the grants file.
	ConnectionOnly bool `json:"connectionOnly,omitempty"`
}

// CancelParams are the params of $/cancelRequest.
type CancelParams struct {
	ID json.RawMessage `json:"id"`
}

// The fs/* methods read and change files in a sandbox's workspace
// (control.FS). A path is relative to the workspace or absolute as
// commands see it (workspaceInside); one that is not UTF-8 travels in
// pathBase64 (docs/json.md). File contents are base64.

// FsPathParams name one path: fs/list, fs/stat.
type FsPathParams struct {
	SandboxID  string `json:"sandboxId"`
	Path       string `json:"path"`
	PathBase64 []byte `json:"pathBase64,omitempty"`
}

// ExactPath is the path byte for byte.
func (p *FsPathParams) ExactPath() string { return lossless.String(p.Path, p.PathBase64) }

// FsReadParams are the params of fs/read.
type FsReadParams struct {
	SandboxID  string `json:"sandboxId"`
	Path       string `json:"path"`
	PathBase64 []byte `json:"pathBase64,omitempty"`
	Offset     int64  `json:"offset,omitempty"`
	Length     int64  `json:"length,omitempty"`
}

// FsReadResult is fs/read's result.
type FsReadResult struct {
	Data []byte `json:"data"` // base64
	Size int64  `json:"size"`
	EOF  bool   `json:"eof"`
}

// FsWriteParams are the params of fs/write.
type FsWriteParams struct {
	SandboxID  string `json:"sandboxId"`
	Path       string `json:"path"`
	PathBase64 []byte `json:"pathBase64,omitempty"`
	Data       []byte `json:"data"` // base64
	Offset     *int64 `json:"offset,omitempty"`
	Append     bool   `json:"append,omitempty"`
}

// FsEntry describes one entry: fs/list's entries, fs/stat's result.
type FsEntry struct {
	FileName       string `json:"fileName"`
	FileNameBase64 []byte `json:"fileNameBase64,omitempty"`
	Type           string `json:"type"` // "file", "directory", "symlink", "other"
	IsFile         bool   `json:"isFile"`
	IsDirectory    bool   `json:"isDirectory"`
	IsSymlink      bool   `json:"isSymlink"`
	Size           int64  `json:"size"`
	Mode           int64  `json:"mode"` // permission bits, e.g. 420 (0644)
	ModifiedAtMs   int64  `json:"modifiedAtMs"`
}

// ExactFileName is the name byte for byte.
func (e *FsEntry) ExactFileName() string { return lossless.String(e.FileName, e.FileNameBase64) }

// FsListResult is fs/list's result.
type FsListResult struct {
	Entries   []FsEntry `json:"entries"`
	Truncated bool      `json:"truncated"`
}

// FsRemoveParams are the params of fs/remove.
type FsRemoveParams struct {
	SandboxID  string `json:"sandboxId"`
	Path       string `json:"path"`
	PathBase64 []byte `json:"pathBase64,omitempty"`
	Recursive  bool   `json:"recursive,omitempty"`
	Force      bool   `json:"force,omitempty"`
}

// FsMkdirParams are the params of fs/mkdir.
type FsMkdirParams struct {
	SandboxID  string `json:"sandboxId"`
	Path       string `json:"path"`
	PathBase64 []byte `json:"pathBase64,omitempty"`
	Recursive  bool   `json:"recursive,omitempty"`
}

// FsRenameParams are the params of fs/rename.
type FsRenameParams struct {
	SandboxID     string `json:"sandboxId"`
	Path          string `json:"path"`
	PathBase64    []byte `json:"pathBase64,omitempty"`
	NewPath       string `json:"newPath"`
	NewPathBase64 []byte `json:"newPathBase64,omitempty"`
	Overwrite     bool   `json:"overwrite,omitempty"`
}
