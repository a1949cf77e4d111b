package rpc

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
)

// The JSON Schema of the protocol (docs/protocol.schema.json) is generated
// from the wire types in types.go by reflection, so the two cannot drift:
// TestSchemaUpToDate fails when the checked-in file differs from Schema().
// What reflection cannot see (the allowed values of a string, a nullable
// []byte) is in fieldNotes below; every entry must name a real field.

// msgDirection says who sends a message.
type msgDirection int

const (
	clientToServer msgDirection = iota + 1
	serverToClient
	bothWays
)

func (d msgDirection) String() string {
	switch d {
	case clientToServer:
		return "client → server"
	case serverToClient:
		return "server → client"
	default:
		return "either way"
	}
}

// methodSpec is one method of the protocol: its params type and, for a
// request, its result type (nil: a notification). A params or result of
// type struct{} is an empty object; for params, it may be left out.
type methodSpec struct {
	dir     msgDirection
	params  any
	result  any
	summary string
}

// protocolMethods is every method of the protocol: the Method* constants
// of types.go (a test checks that each one is here).
var protocolMethods = map[string]methodSpec{
	MethodInitialize: {clientToServer, InitializeParams{}, InitializeResult{},
		"The first request of a connection: agree on the protocol version, learn the server's backends and limits."},
	MethodInitialized: {clientToServer, struct{}{}, nil,
		"Sent once after the initialize response; then the connection is ready."},
	MethodSandboxOpen: {clientToServer, SandboxOpenParams{}, SandboxOpenResult{},
		"Open a sandbox (kept until sandbox/close or the end of the connection); processes run in it."},
	MethodSandboxClose: {clientToServer, SandboxCloseParams{}, struct{}{},
		"Stop the sandbox's processes and remove the sandbox."},
	MethodGateRegister: {clientToServer, GateRegisterParams{}, struct{}{},
		"Add a gate that the client answers (gate/call) to every sandbox of the connection."},
	MethodGateUnregister: {clientToServer, GateUnregisterParams{}, struct{}{},
		"Remove a gate registered with gate/register."},
	MethodGateList: {clientToServer, struct{}{}, []GateDoc{},
		"Every gate a sandbox of this connection offers: the same JSON as `gatebridge gates --format json`."},
	MethodProcessStart: {clientToServer, ProcessStartParams{}, ProcessStartResult{},
		"Start a process in a sandbox; its output comes as process/output notifications, then process/exited."},
	MethodProcessWrite: {clientToServer, ProcessWriteParams{}, struct{}{},
		"Write to the stdin of a process started with stdin: true."},
	MethodProcessCloseStdin: {clientToServer, ProcessIDParams{}, struct{}{},
		"Close the stdin of a process (it reads end of file)."},
	MethodProcessSignal: {clientToServer, ProcessSignalParams{}, struct{}{},
		"Send a signal to the process group of a process."},
	MethodProcessResize: {clientToServer, ProcessResizeParams{}, struct{}{},
		"Change the size of the terminal of a process started with tty (the command gets SIGWINCH)."},
	MethodProcessWait: {clientToServer, ProcessWaitParams{}, ProcessWaitResult{},
		"Wait until a process exits, or timeoutMs passes (then running is true)."},
	MethodProcessRead: {clientToServer, ProcessReadParams{}, ProcessReadResult{},
		"Read a process's output chunks after a seq from its replay buffer, for clients that poll or reconnect."},
	MethodProcessSnapshot: {clientToServer, ProcessIDParams{}, ProcessSnapshotResult{},
		"The retained head and tail of a process's stdout and stderr."},
	MethodProcessList: {clientToServer, struct{}{}, ProcessListResult{},
		"The processes of the connection, running and recently exited."},
	MethodFsRead: {clientToServer, FsReadParams{}, FsReadResult{},
		"Read a chunk of a regular file in a sandbox's workspace (at most limits.maxFsChunkBytes); loop on offset until eof."},
	MethodFsWrite: {clientToServer, FsWriteParams{}, struct{}{},
		"Write a regular file in a writable workspace: replace it atomically (no offset, no append), append, or write at offset; missing parent directories are made."},
	MethodFsList: {clientToServer, FsPathParams{}, FsListResult{},
		"List a directory of a sandbox's workspace, sorted by name; links are listed, not followed."},
	MethodFsStat: {clientToServer, FsPathParams{}, FsEntry{},
		"Describe one entry of a sandbox's workspace without following a link."},
	MethodFsRemove: {clientToServer, FsRemoveParams{}, struct{}{},
		"Remove a file, a link or an empty directory (recursive: a whole tree) in a writable workspace."},
	MethodFsMkdir: {clientToServer, FsMkdirParams{}, struct{}{},
		"Make a directory in a writable workspace (recursive: with its parents; an existing directory is then no error)."},
	MethodFsRename: {clientToServer, FsRenameParams{}, struct{}{},
		"Move an entry within a writable workspace (a link is moved, not followed); newPath's parents are made."},

	MethodProcessOutput: {serverToClient, ProcessOutputParams{}, nil,
		"A chunk of a process's output; seq starts at 1 and grows across stdout and stderr."},
	MethodProcessExited: {serverToClient, ProcessExitedParams{}, nil,
		"A process exited; sent after its last process/output and process/gateCall. gateCalls lists the gate calls its command made."},
	MethodProcessGateCall: {serverToClient, ProcessGateCallParams{}, nil,
		"A gate call of a process started with reportGateCalls, once it is answered; in order with process/output, before process/exited."},

	MethodGateCall: {serverToClient, GateCallParams{}, GateCallResult{},
		"A command in a sandbox called a gate the client registered; the client runs it and answers."},
	MethodGateOutput: {clientToServer, GateOutputParams{}, nil,
		"Output of a gate/call not yet answered, passed to the caller at once."},
	MethodApprovalRequest: {serverToClient, ApprovalRequestParams{}, ApprovalResult{},
		"Ask the client whether a gate that needs approval may run."},
	MethodCancelRequest: {bothWays, CancelParams{}, nil,
		"The request with this id is no longer wanted (the server sends it for gate/call and approval/request); a late answer is ignored."},
}

// fieldNote adds to the schema of one field what its Go type does not say.
type fieldNote struct {
	enum          []string
	nullable      bool   // null is allowed besides the type's values
	nullableItems bool   // an array whose items may also be null
	ref           string // the field's schema is this $defs entry instead
	description   string
}

// fieldNotes are keyed by "GoType.jsonName".
var fieldNotes = map[string]fieldNote{
	"InitializeParams.authToken": {description: "Over `serve --listen`: the server's token, required in the first message (else -32006 and the connection is closed). Unused over stdio."},
	"SandboxOpenParams.backend": {enum: []string{"auto", "local", "bwrap", "docker"},
		description: "auto: the strongest usable backend (never local unless the server allows unsandboxed runs)."},
	"SandboxOpenParams.workspace":          {description: "An absolute host directory: the processes' default cwd and the root the file gates see."},
	"SandboxOpenResult.workspaceInside":    {description: "Where commands in the sandbox see the workspace."},
	"GateRegisterParams.stdin":             {enum: []string{"none", "if-no-args", "always", "if-at-dash"}, description: "When the caller's stdin is forwarded to the gate (default if-no-args: when the gate is called without arguments)."},
	"GateRegisterParams.inputSchema":       {description: "A JSON Schema of an object describing the gate's arguments (instead of params)."},
	"GateRegisterParams.timeoutMs":         {description: "How long the client may take to answer a gate/call (default limits.gateTimeoutMs)."},
	"GateRegisterParams.approval":          {description: "Send approval/request before every call (until allowForSession)."},
	"GateDoc.stdin":                        {enum: []string{"none", "if-no-args", "always", "if-at-dash"}},
	"GateDoc.kind":                         {enum: []string{"builtin", "command", "runtime"}},
	"GateDoc.inputSchema":                  {description: "The schema given to gate/register, for runtime gates registered with one."},
	"ProcessStartParams.processId":         {description: "Chosen by the client; unique on the connection. 1-64 of [A-Za-z0-9_.-], starting with a letter or digit."},
	"ProcessStartParams.cwd":               {description: "Relative to the workspace, or absolute as the sandbox sees the workspace (workspaceInside); default the workspace."},
	"ProcessStartParams.env":               {description: "Added to the sandbox's environment (and sandbox/open's env)."},
	"ProcessStartParams.stdin":             {description: "true: stdin is a pipe fed by process/write; false (default): /dev/null."},
	"ProcessStartParams.timeoutMs":         {description: "Stop the process after this long (TERM, then KILL); default limits.defaultTimeoutMs (0: none)."},
	"ProcessSignalParams.signal":           {enum: []string{"INT", "TERM", "KILL", "HUP"}},
	"ProcessWaitParams.timeoutMs":          {description: "Wait at most this long; 0 or absent: until the process exits."},
	"ProcessWaitResult.exitCode":           {description: "null while the process runs."},
	"ProcessWaitResult.signal":             {description: "The signal that ended the process (its exit code is 128+N), e.g. TERM."},
	"ProcessWaitResult.timedOut":           {description: "The process was stopped by its timeoutMs (exit code 124)."},
	"ProcessReadParams.afterSeq":           {description: "Return chunks with a seq greater than this (0: from the start)."},
	"ProcessReadParams.maxBytes":           {description: "At most about this many bytes of chunks (at least one chunk); default and cap limits.maxReplayBytes."},
	"ProcessReadParams.waitMs":             {description: "When there is no chunk yet and the process runs, wait up to this long for one."},
	"ProcessReadResult.firstSeq":           {description: "The oldest seq still retained; earlier chunks were dropped (the replay buffer is capped)."},
	"ProcessReadResult.nextSeq":            {description: "The seq the next chunk will get."},
	"ProcessSnapshotResult.omittedBytes":   {description: "Bytes left out between head and tail, over both streams."},
	"Chunk.stream":                         {enum: []string{"stdout", "stderr"}},
	"ProcessOutputParams.stream":           {enum: []string{"stdout", "stderr"}},
	"GateCallParams.callId":                {description: "Names the call in gate/output."},
	"GateCallParams.args":                  {description: "The arguments after the gate's name, as the caller gave them; one that is not UTF-8 has U+FFFD for its bad bytes here and its exact bytes in argsBase64."},
	"GateCallParams.argsBase64":            {nullableItems: true, description: bytesSibling("args", true)},
	"GateCallParams.cwdBase64":             {description: bytesSibling("cwd", false)},
	"ApprovalRequestParams.args":           {description: "The caller's arguments, as in gate/call (argsBase64 holds those that are not UTF-8)."},
	"ApprovalRequestParams.argsBase64":     {nullableItems: true, description: bytesSibling("args", true)},
	"ProcessExitedParams.answerBase64":     {description: bytesSibling("answer", false)},
	"GateCallParams.stdin":                 {nullable: true, description: "The caller's stdin when the gate's stdin mode forwards it; null when none was sent."},
	"GateCallParams.cwd":                   {description: "The caller's working directory as the sandbox sees it (untrusted); empty when unknown."},
	"GateCallParams.deadlineMs":            {description: "Unix time in milliseconds by which to answer; after it the caller gets exit 1 and $/cancelRequest is sent."},
	"GateCallResult.exitCode":              {description: "The caller's exit code, 0-255."},
	"GateOutputParams.stream":              {enum: []string{"stdout", "stderr"}},
	"ApprovalRequestParams.offers":         {description: "The grants the answer may give besides this call, narrowest first (docs/approvals.md): answer allow with one of them as grant to keep it."},
	"ApprovalRequestParams.rule":           {description: "Present when the command policy (policy.commands) is what asks: the rule, or the default or unknown setting, in words."},
	"ApprovalRequestParams.command":        {description: "Present when the question is about a command the command policy marks ask, before it starts (process/start), not a gate call: gate is then empty and offers absent; allow or deny it."},
	"ApprovalRequestParams.commandBase64":  {nullableItems: true, description: bytesSibling("command", true)},
	"ApprovalGrant.scope":                  {enum: []string{ScopeExact, ScopePatterns, ScopeAny}, description: "exact: these arguments byte for byte (exact, exactBase64); patterns: as many arguments as patterns, each matching its RE2 pattern in full; any: whatever the gate's own policy allows."},
	"ApprovalGrant.exactBase64":            {nullableItems: true, description: bytesSibling("exact", true)},
	"ApprovalGrant.lifetime":               {enum: []string{"session", "workspace", "always"}, description: "session: the sandbox's life (kept in memory); workspace: sandboxes of this workspace; always: every workspace (both kept in the server's grants file)."},
	"ApprovalGrant.workspace":              {description: "The workspace of a workspace grant (in an answer, the call's workspace is used)."},
	"ApprovalGrant.expiresMs":              {description: "Unix time in milliseconds when the grant ends; absent: it does not expire."},
	"ApprovalGrant.description":            {description: "What the grant allows, in words (offers only; ignored in an answer)."},
	"ApprovalResult.decision":              {enum: []string{DecisionAllow, DecisionDeny, DecisionAllowForSession}, description: "allowForSession: allow this gate with any arguments for the rest of the sandbox's life (the session offer)."},
	"ApprovalResult.grant":                 {description: "With allow: a grant to keep (an offer, or one of the client's making for this gate), stored as the person's own would be; a later call it matches runs without asking."},
	"ApprovalResult.connectionOnly":        {description: "Keep grant for the sandbox's life only, whatever its lifetime: nothing is written to the grants file."},
	"ApprovalResult.reason":                {description: "Shown to the caller on deny."},
	"CancelParams.id":                      {ref: "RequestId"},
	"ConnLimits.maxRetainedBytes":          {description: "Per stream: process/snapshot keeps this many bytes of the head and as many of the tail."},
	"ConnLimits.maxReplayBytes":            {description: "Per process: the output process/read can replay."},
	"ConnLimits.defaultTimeoutMs":          {description: "The timeout of process/start without timeoutMs (0: none)."},
	"ConnLimits.gateTimeoutMs":             {description: "How long the client may take to answer gate/call, for gates registered without timeoutMs."},
	"ConnLimits.maxFsChunkBytes":           {description: "The most data one fs/read returns or one fs/write carries (before base64)."},
	"ConnLimits.maxFsFileBytes":            {description: "The largest file fs/write leaves (gates.max_file_bytes)."},
	"FsPathParams.path":                    {description: fsPathNote},
	"FsPathParams.pathBase64":              {description: bytesSibling("path", false)},
	"FsReadParams.path":                    {description: fsPathNote},
	"FsReadParams.pathBase64":              {description: bytesSibling("path", false)},
	"FsReadParams.offset":                  {description: "Byte offset to read from (default 0)."},
	"FsReadParams.length":                  {description: "Bytes to read at most (default and cap limits.maxFsChunkBytes)."},
	"FsReadResult.size":                    {description: "The file's size when it was opened."},
	"FsReadResult.eof":                     {description: "data reaches the end of the file."},
	"FsWriteParams.path":                   {description: fsPathNote},
	"FsWriteParams.pathBase64":             {description: bytesSibling("path", false)},
	"FsWriteParams.data":                   {description: "The bytes to write, base64; at most limits.maxFsChunkBytes. A larger file: the first chunk without offset or append, the next ones with append."},
	"FsWriteParams.offset":                 {description: "Write in place at this byte offset (the file is made if missing); not with append."},
	"FsWriteParams.append":                 {description: "Add data at the end (the file is made if missing)."},
	"FsEntry.fileName":                     {description: "The entry's name (fs/list) or the path asked for (fs/stat)."},
	"FsEntry.fileNameBase64":               {description: bytesSibling("fileName", false)},
	"FsEntry.type":                         {enum: []string{"file", "directory", "symlink", "other"}},
	"FsEntry.mode":                         {description: "Permission bits (0644 is 420)."},
	"FsEntry.modifiedAtMs":                 {description: "Last modification, Unix time in milliseconds (0: unknown)."},
	"FsListResult.truncated":               {description: "The directory holds more entries than were listed (the cap is the gates' max_dir_entries default, 10000)."},
	"FsRemoveParams.path":                  {description: fsPathNote},
	"FsRemoveParams.pathBase64":            {description: bytesSibling("path", false)},
	"FsRemoveParams.force":                 {description: "A missing path is no error."},
	"FsMkdirParams.path":                   {description: fsPathNote},
	"FsMkdirParams.pathBase64":             {description: bytesSibling("path", false)},
	"FsRenameParams.path":                  {description: fsPathNote},
	"FsRenameParams.pathBase64":            {description: bytesSibling("path", false)},
	"FsRenameParams.newPathBase64":         {description: bytesSibling("newPath", false)},
	"FsRenameParams.overwrite":             {description: "Replace an entry at newPath (default: an error)."},
	"ConnLimits.approvalTimeoutMs":         {description: "How long the client may take to answer approval/request."},
	"ProcessExitedParams.gateCalls":        {description: "The gate calls the command made, in order, as `run --json` lists them in calls: the first limits.maxGateCalls."},
	"ProcessExitedParams.gateCallsDropped": {description: "Gate calls made but not listed in gateCalls (past limits.maxGateCalls or the server's bridge.limits.max_records, or refused in a flood past max_calls)."},
	"ProcessStartParams.reportGateCalls":   {description: "Send a process/gateCall notification for each gate call the command makes (process/exited lists them either way)."},
	"GateCallReport.callId":                {description: "The call's id in the process's session (not a gate/call callId)."},
	"GateCallReport.gate":                  {description: "The gate called; for an unknown gate (decision unknown) the name as the caller gave it, any bytes: one that is not UTF-8 has U+FFFD here and its exact bytes in gateBase64."},
	"GateCallReport.gateBase64":            {description: bytesSibling("gate", false)},
	"GateCallReport.args":                  {description: "The arguments after the gate's name (after the JSON-object convention), capped as `run --json` caps them, secret values shown as [secret:NAME]; one that is not UTF-8 has U+FFFD here and its exact bytes in argsBase64."},
	"GateCallReport.argsBase64":            {nullableItems: true, description: bytesSibling("args", true)},
	"GateCallReport.exitCode":              {description: "The exit code the caller got."},
	"GateCallReport.decision":              {enum: []string{"ran", "denied", "rejected", "timed_out", "unknown", "canceled"}, description: "What became of the call: ran (whatever its exit code), denied (policy or approval, 126), rejected (malformed or over a limit), timed_out (124), unknown (no such gate, 127), canceled (the run ended, 124)."},
	"GateCallReport.decidedBy":             {description: "Who decided, for a gate that needed approval: person, runtime, grant, config, policy, timeout, limit, canceled, no_one; absent when no one was asked."},
	"GateCallReport.error":                 {description: "Why the call failed, as the caller was told (secret values redacted)."},
	"GateCallReport.events":                {description: "What the gate did on the host that its output does not show, e.g. an http gate's requests {kind: http_request, method, url, rule, status, bytes}; at most 32."},
	"GateCallReport.eventsOmitted":         {description: "Events past the 32 kept."},
	"ConnLimits.maxGateCalls":              {description: "Per process: the gate-call records process/exited lists (the rest are counted in gateCallsDropped)."},
	"ProcessStartParams.tty":               {description: "Run the command on a pseudo-terminal of this size: its stdin, stdout and stderr are the terminal, so its output is one stream (stdout; nothing on stderr) with the terminal's line endings (\\r\\n); process/write types at it and process/closeStdin sends end-of-file (Ctrl-D). A backend that cannot (the sh agent of a long-lived docker sandbox) is refused with -32602."},
	"ProcessStartParams.arg0":              {description: "The argv[0] the command sees (argv[0] stays the program run), e.g. -sh for a login shell. A backend that cannot (bwrap before 0.9, the sh agent) is refused with -32602."},
	"TTYSize.rows":                         {description: "1-65535."},
	"TTYSize.cols":                         {description: "1-65535."},
	"Error.data":                           {description: "More about the error (e.g. hint, backend, supported versions)."},
}

// jsonSchema is one JSON Schema (draft 2020-12) node; fields marshal in
// this order.
type jsonSchema struct {
	Schema               string                 `json:"$schema,omitempty"`
	ID                   string                 `json:"$id,omitempty"`
	Title                string                 `json:"title,omitempty"`
	Description          string                 `json:"description,omitempty"`
	Ref                  string                 `json:"$ref,omitempty"`
	Type                 any                    `json:"type,omitempty"` // a string, or []string with "null"
	Const                any                    `json:"const,omitempty"`
	Enum                 []any                  `json:"enum,omitempty"`
	ContentEncoding      string                 `json:"contentEncoding,omitempty"`
	Properties           *schemaProps           `json:"properties,omitempty"`
	Required             []string               `json:"required,omitempty"`
	AdditionalProperties any                    `json:"additionalProperties,omitempty"` // false or *jsonSchema
	Items                *jsonSchema            `json:"items,omitempty"`
	AnyOf                []*jsonSchema          `json:"anyOf,omitempty"`
	Defs                 map[string]*jsonSchema `json:"$defs,omitempty"`
}

// schemaProps keep the order of the Go struct's fields.
type schemaProps struct {
	names []string
	props map[string]*jsonSchema
}

func (p *schemaProps) add(name string, s *jsonSchema) {
	if p.props == nil {
		p.props = map[string]*jsonSchema{}
	}
	p.names = append(p.names, name)
	p.props[name] = s
}

func (p *schemaProps) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range p.names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		v, err := json.Marshal(p.props[n])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func schemaRef(name string) string { return "#/$defs/" + name }

var (
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	durationType      = reflect.TypeFor[time.Duration]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// schemaGen turns Go types into schemas, collecting named structs in defs.
type schemaGen struct {
	defs      map[string]*jsonSchema
	types     map[string]reflect.Type // def name → the type it came from
	usedNotes map[string]bool
}

// Schema returns the JSON Schema (draft 2020-12) of every message of the
// protocol, as indented JSON: the root accepts any message either side
// may send; $defs has each method's request, response or notification
// (e.g. ProcessStartRequest, ProcessStartResponse, ProcessOutputNotification),
// the generic envelopes and every wire type of types.go.
func Schema() ([]byte, error) {
	g := &schemaGen{defs: map[string]*jsonSchema{}, types: map[string]reflect.Type{}, usedNotes: map[string]bool{}}
	if err := g.envelope(); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(protocolMethods))
	var client, server []*jsonSchema
	for _, m := range names {
		spec := protocolMethods[m]
		sent, answers, err := g.method(m, spec)
		if err != nil {
			return nil, fmt.Errorf("schema: method %s: %w", m, err)
		}
		// A request's response travels the other way.
		if spec.dir == clientToServer || spec.dir == bothWays {
			client = append(client, sent)
			server = append(server, answers...)
		}
		if spec.dir == serverToClient || spec.dir == bothWays {
			server = append(server, sent)
			client = append(client, answers...)
		}
	}
	errResp := &jsonSchema{Ref: schemaRef("ErrorResponse")}
	client = append(client, errResp)
	server = append(server, errResp)
	if err := g.addDef("ClientMessage", &jsonSchema{
		Description: "Any message the client sends: its requests and notifications, and its responses to the server's requests.",
		AnyOf:       client,
	}); err != nil {
		return nil, err
	}
	if err := g.addDef("ServerMessage", &jsonSchema{
		Description: "Any message the server sends: its notifications and requests, and its responses to the client's requests.",
		AnyOf:       server,
	}); err != nil {
		return nil, err
	}
	var unused []string
	for k := range fieldNotes {
		if !g.usedNotes[k] {
			unused = append(unused, k)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("schema: fieldNotes name no field: %s", strings.Join(unused, ", "))
	}
	root := &jsonSchema{
		Schema: "https://json-schema.org/draft/2020-12/schema",
		ID:     "https://github.com/gatebridge/gatebridge/docs/protocol.schema.json",
		Title:  fmt.Sprintf("gatebridge JSON-RPC protocol, version %d (gatebridge serve --stdio)", ProtocolVersion),
		Description: "One JSON-RPC 2.0 message per line each way (docs/jsonrpc.md). Bytes are base64 strings. " +
			"Generated from bridge/rpc/types.go by bridge/rpc/schema.go: do not edit; run `make schema`.",
		AnyOf: []*jsonSchema{{Ref: schemaRef("ClientMessage")}, {Ref: schemaRef("ServerMessage")}},
		Defs:  g.defs,
	}
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (g *schemaGen) addDef(name string, s *jsonSchema) error {
	if _, dup := g.defs[name]; dup {
		return fmt.Errorf("schema: two definitions are called %s", name)
	}
	g.defs[name] = s
	return nil
}

var jsonrpcVersion = &jsonSchema{Const: "2.0"}

// envelope adds the generic message shapes and the error object.
func (g *schemaGen) envelope() error {
	idRef := &jsonSchema{Ref: schemaRef("RequestId")}
	errSchema, err := g.schemaOf(reflect.TypeFor[Error]())
	if err != nil {
		return err
	}
	obj := func(desc string, req []string, names []string, ss ...*jsonSchema) *jsonSchema {
		p := &schemaProps{}
		for i, n := range names {
			p.add(n, ss[i])
		}
		return &jsonSchema{Description: desc, Type: "object", Properties: p, Required: req, AdditionalProperties: false}
	}
	defs := []struct {
		name string
		s    *jsonSchema
	}{
		{"RequestId", &jsonSchema{Description: "A request id: the client picks its own (a string or an integer); the server's are strings \"s1\", \"s2\", …",
			Type: []string{"string", "integer"}}},
		{"Request", obj("A request: answered by a response with the same id.",
			[]string{"jsonrpc", "id", "method"}, []string{"jsonrpc", "id", "method", "params"},
			jsonrpcVersion, idRef, &jsonSchema{Type: "string"}, &jsonSchema{Type: "object"})},
		{"Notification", obj("A notification: no id, never answered.",
			[]string{"jsonrpc", "method"}, []string{"jsonrpc", "method", "params"},
			jsonrpcVersion, &jsonSchema{Type: "string"}, &jsonSchema{Type: "object"})},
		{"Response", obj("A successful response: result is the method's result.",
			[]string{"jsonrpc", "id", "result"}, []string{"jsonrpc", "id", "result"},
			jsonrpcVersion, idRef, &jsonSchema{Description: "any JSON value"})},
		{"ErrorResponse", obj("A failed request. id is null when the request's id could not be read (a parse error, a message too large).",
			[]string{"jsonrpc", "id", "error"}, []string{"jsonrpc", "id", "error"},
			jsonrpcVersion, &jsonSchema{AnyOf: []*jsonSchema{idRef, {Type: "null"}}}, errSchema)},
	}
	for _, d := range defs {
		if err := g.addDef(d.name, d.s); err != nil {
			return err
		}
	}
	return nil
}

// schemaDefName is a method's name in $defs: "process/closeStdin" →
// "ProcessCloseStdin", "$/cancelRequest" → "CancelRequest".
func schemaDefName(method string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(method, func(r rune) bool { return r == '/' || r == '$' }) {
		r := []rune(part)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

// method adds the definitions of one method's messages and returns a
// reference to the message its sender sends and to its response.
func (g *schemaGen) method(m string, spec methodSpec) (sent *jsonSchema, answers []*jsonSchema, err error) {
	if spec.params == nil {
		return nil, nil, fmt.Errorf("no params type (use struct{}{} for none)")
	}
	pt := reflect.TypeOf(spec.params)
	params, err := g.schemaOf(pt)
	if err != nil {
		return nil, nil, err
	}
	noParams := pt.Kind() == reflect.Struct && pt.NumField() == 0
	base := schemaDefName(m)
	props := &schemaProps{}
	props.add("jsonrpc", jsonrpcVersion)
	req := []string{"jsonrpc"}
	kind := "notification"
	name := base + "Notification"
	if spec.result != nil {
		kind, name = "request", base+"Request"
		props.add("id", &jsonSchema{Ref: schemaRef("RequestId")})
		req = append(req, "id")
	}
	props.add("method", &jsonSchema{Const: m})
	req = append(req, "method")
	props.add("params", params)
	if !noParams {
		req = append(req, "params")
	}
	msg := &jsonSchema{
		Title:       m + " " + kind + " (" + spec.dir.String() + ")",
		Description: spec.summary,
		Type:        "object", Properties: props, Required: req, AdditionalProperties: false,
	}
	if err := g.addDef(name, msg); err != nil {
		return nil, nil, err
	}
	sent = &jsonSchema{Ref: schemaRef(name)}
	if spec.result == nil {
		return sent, nil, nil
	}
	result, err := g.schemaOf(reflect.TypeOf(spec.result))
	if err != nil {
		return nil, nil, err
	}
	rprops := &schemaProps{}
	rprops.add("jsonrpc", jsonrpcVersion)
	rprops.add("id", &jsonSchema{Ref: schemaRef("RequestId")})
	rprops.add("result", result)
	resp := &jsonSchema{
		Title: "response to " + m,
		Type:  "object", Properties: rprops, Required: []string{"jsonrpc", "id", "result"}, AdditionalProperties: false,
	}
	if err := g.addDef(base+"Response", resp); err != nil {
		return nil, nil, err
	}
	return sent, []*jsonSchema{{Ref: schemaRef(base + "Response")}}, nil
}

// schemaOf returns the schema of values of t as encoding/json writes
// them; a named struct becomes a $defs entry and a reference to it.
func (g *schemaGen) schemaOf(t reflect.Type) (*jsonSchema, error) {
	switch {
	case t == rawMessageType:
		return &jsonSchema{Description: "any JSON value"}, nil
	case t == durationType:
		return nil, fmt.Errorf("time.Duration is not a wire type (use an int64 of milliseconds, named ...Ms)")
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		return nil, fmt.Errorf("%s has its own MarshalJSON: its schema cannot be derived", t)
	case t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		return &jsonSchema{Type: "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &jsonSchema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &jsonSchema{Type: "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return &jsonSchema{Type: "number"}, nil
	case reflect.String:
		return &jsonSchema{Type: "string"}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &jsonSchema{Type: "string", ContentEncoding: "base64"}, nil
		}
		items, err := g.schemaOf(t.Elem())
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		elem, err := g.schemaOf(t.Elem())
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Type: "object", AdditionalProperties: elem}, nil
	case reflect.Pointer:
		elem, err := g.schemaOf(t.Elem())
		if err != nil {
			return nil, err
		}
		return schemaNullable(elem)
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return &jsonSchema{Description: "any JSON value"}, nil
		}
	case reflect.Struct:
		return g.structSchema(t)
	}
	return nil, fmt.Errorf("%s: %s is not a wire type", t, t.Kind())
}

// schemaNullable lets s also be null.
func schemaNullable(s *jsonSchema) (*jsonSchema, error) {
	switch typ := s.Type.(type) {
	case string:
		if len(s.Enum) > 0 {
			n := *s
			n.Type, n.Enum = []string{typ, "null"}, append(append([]any(nil), s.Enum...), nil)
			return &n, nil
		}
		n := *s
		n.Type = []string{typ, "null"}
		return &n, nil
	case nil:
		if s.Ref != "" {
			return &jsonSchema{AnyOf: []*jsonSchema{s, {Type: "null"}}}, nil
		}
		if s.AnyOf == nil && s.Const == nil && s.Enum == nil {
			return s, nil // any JSON value: null included
		}
	}
	return nil, fmt.Errorf("cannot make %+v nullable", s)
}

func (g *schemaGen) structSchema(t reflect.Type) (*jsonSchema, error) {
	name := t.Name()
	if name == "" {
		if t.NumField() == 0 {
			return &jsonSchema{Type: "object", AdditionalProperties: false}, nil
		}
		return nil, fmt.Errorf("anonymous struct %s: give it a name", t)
	}
	if prev, ok := g.types[name]; ok {
		if prev != t {
			return nil, fmt.Errorf("two types are called %s: %s and %s", name, prev.PkgPath(), t.PkgPath())
		}
		return &jsonSchema{Ref: schemaRef(name)}, nil
	}
	if _, taken := g.defs[name]; taken {
		return nil, fmt.Errorf("type %s has the name of a message definition", t)
	}
	g.types[name] = t
	g.defs[name] = nil // reserved (recursive types)
	s := &jsonSchema{Type: "object", Properties: &schemaProps{}, AdditionalProperties: false}
	if t.PkgPath() != reflect.TypeFor[Message]().PkgPath() {
		s.Description = "Go type " + t.String() + "."
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		if f.Anonymous {
			return nil, fmt.Errorf("%s.%s: embedded fields are not supported", name, f.Name)
		}
		jname, opts, _ := strings.Cut(tag, ",")
		if jname == "" {
			jname = f.Name
		}
		omitempty := false
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty", "omitzero":
				omitempty = true
			case "string":
				return nil, fmt.Errorf("%s.%s: the ,string option is not supported", name, f.Name)
			}
		}
		fs, err := g.schemaOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", name, f.Name, err)
		}
		key := name + "." + jname
		if note, ok := fieldNotes[key]; ok {
			g.usedNotes[key] = true
			if fs, err = applyFieldNote(fs, note); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
		s.Properties.add(jname, fs)
		if !omitempty {
			s.Required = append(s.Required, jname)
		}
	}
	g.defs[name] = s
	return &jsonSchema{Ref: schemaRef(name)}, nil
}

// bytesSibling describes the base64 sibling of a field that may hold
// bytes that are not UTF-8 (docs/json.md, "Bytes that are not UTF-8").
// fsPathNote describes the path of every fs/* method.
const fsPathNote = "Relative to the workspace, or absolute as commands see it (workspaceInside). No link is followed, nothing outside the workspace and no protected path (sandbox.protected_paths) is reached."

func bytesSibling(field string, list bool) string {
	if list {
		return "Present only when an element of " + field + " is not valid UTF-8: one entry per element, the exact bytes of each such element " +
			"in base64 and null for the others (docs/json.md, \"Bytes that are not UTF-8\")."
	}
	return "Present only when " + field + " is not valid UTF-8: its exact bytes in base64 (docs/json.md, \"Bytes that are not UTF-8\")."
}

func applyFieldNote(s *jsonSchema, n fieldNote) (*jsonSchema, error) {
	if n.ref != "" {
		s = &jsonSchema{Ref: schemaRef(n.ref)}
	}
	if n.nullableItems {
		if s.Type != "array" || s.Items == nil {
			return nil, fmt.Errorf("nullableItems on a non-array field")
		}
		items, err := schemaNullable(s.Items)
		if err != nil {
			return nil, err
		}
		c := *s
		c.Items = items
		s = &c
	}
	if len(n.enum) > 0 {
		if s.Type != "string" {
			return nil, fmt.Errorf("enum on a non-string field")
		}
		c := *s
		for _, v := range n.enum {
			c.Enum = append(c.Enum, v)
		}
		s = &c
	}
	if n.nullable {
		var err error
		if s, err = schemaNullable(s); err != nil {
			return nil, err
		}
	}
	if n.description != "" {
		if s.Ref != "" {
			// Keywords beside $ref are allowed in 2020-12.
			s = &jsonSchema{Ref: s.Ref}
		} else {
			c := *s
			s = &c
		}
		s.Description = n.description
	}
	return s, nil
}
