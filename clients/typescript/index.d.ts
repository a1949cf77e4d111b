// Types of the gatebridge JavaScript client (index.js). Hand-written:
// `make test-clients` checks index.js against its JSDoc and this file
// against the exports (tsc --noEmit -p clients/typescript, and
// test/surface.test.js). Bytes are Uint8Array here (at run time they are
// Node Buffers, a subclass). Times are in seconds.

export declare const VERSION: string;
/** The protocol version this client speaks. */
export declare const PROTOCOL_VERSION: 1;
export declare const DEFAULT_MAX_LINE_BYTES: number;

export declare const PARSE_ERROR: -32700;
export declare const INVALID_REQUEST: -32600;
export declare const METHOD_NOT_FOUND: -32601;
export declare const INVALID_PARAMS: -32602;
export declare const INTERNAL_ERROR: -32603;
export declare const NOT_FOUND: -32001;
export declare const NOT_INITIALIZED: -32002;
export declare const LIMIT: -32003;
export declare const UNAVAILABLE: -32004;
export declare const CONFLICT: -32005;
/** `serve --listen` refused the connection: no initialize with the server's token. */
export declare const UNAUTHORIZED: -32006;
export declare const POLICY_DENIED: -32007;
export declare const REQUEST_CANCELLED: -32800;
/** Client-side only: the connection to the server is gone. */
export declare const CONNECTION_CLOSED: -32099;
/** The code of the error this client answers when a gate function throws. */
export declare const GATE_FAILED: -32000;

export type Data = string | Uint8Array;
export type Command = string | readonly string[];
export type Stream = "stdout" | "stderr";
export type SignalName = "INT" | "TERM" | "KILL" | "HUP";
export type Backend = "auto" | "local" | "bwrap" | "docker";
export type StdinMode = "none" | "if-no-args" | "always" | "if-at-dash";
export type Decision = "allow" | "deny" | "allowForSession";

// ---------------------------------------------------------------- errors

/** An error response from the server; a subclass names its code. */
export declare class GatebridgeError extends Error {
  constructor(code: number, message: string, data?: unknown);
  readonly code: number;
  /** The response's data (e.g. {hint, backend, supported}). */
  readonly data: unknown;
  /** data.hint, when the server gave one. */
  readonly hint: string | undefined;
}
interface TypedErrorClass<C extends number> {
  new (message: string, data?: unknown): GatebridgeError & { readonly code: C };
  readonly code: C;
}
export declare const ParseError: TypedErrorClass<-32700>;
export declare const InvalidRequestError: TypedErrorClass<-32600>;
export declare const MethodNotFoundError: TypedErrorClass<-32601>;
export declare const InvalidParamsError: TypedErrorClass<-32602>;
export declare const InternalError: TypedErrorClass<-32603>;
export declare const NotFoundError: TypedErrorClass<-32001>;
export declare const NotInitializedError: TypedErrorClass<-32002>;
export declare const LimitError: TypedErrorClass<-32003>;
export declare const UnavailableError: TypedErrorClass<-32004>;
export declare const ConflictError: TypedErrorClass<-32005>;
export declare const UnauthorizedError: TypedErrorClass<-32006>;
/** The command policy refused the command before it started (data: kind policy_denied, decision, rule, command). */
export declare const PolicyDeniedError: TypedErrorClass<-32007>;
export declare const RequestCancelledError: TypedErrorClass<-32800>;
/** The connection is gone: the server exited, or the client was closed. */
export declare const ConnectionClosedError: TypedErrorClass<-32099>;
/** The typed error of a code (GatebridgeError for a code without a class). */
export declare function errorFor(code: number, message: string, data?: unknown): GatebridgeError;

/** A wait (Process.wait, request with a timeout) ran out of time. */
export declare class TimeoutError extends Error {
  constructor(message: string);
}

// ---------------------------------------------------------------- protocol data

export interface BackendInfo { name: string; summary: string; isolates: string }
/** The connection's caps, as the protocol gives them (milliseconds). */
export interface ConnLimits {
  maxMessageBytes: number; maxSandboxes: number; maxProcesses: number; maxPendingGateCalls: number;
  maxRetainedBytes: number; maxReplayBytes: number; defaultTimeoutMs: number; gateTimeoutMs: number;
  /** process/start's argv, each word and its NUL; maxCommands: per sandbox, absent for no limit (both absent from older servers). */
  maxCommandBytes?: number; maxCommands?: number;
  approvalTimeoutMs: number;
}
export interface Param {
  name: string; description: string; required: boolean; variadic?: boolean; flag?: boolean; type?: string;
}
export interface GateDoc {
  name: string; summary: string; usage: string; params: Param[]; stdin: StdinMode;
  kind: "builtin" | "command" | "runtime"; inputSchema?: unknown;
}
export interface ProcessInfo {
  processId: string; sandboxId: string; argv: string[]; running: boolean; exitCode: number | null;
}
export interface Chunk { seq: number; stream: Stream; data: Uint8Array }
export interface ReadResult { chunks: Chunk[]; exited: boolean; exitCode: number | null; firstSeq: number; nextSeq: number }
export interface Snapshot {
  stdout: Uint8Array; stderr: Uint8Array; truncated: boolean; omittedBytes: number;
  exitCode: number | null; running: boolean;
}
export interface WaitStatus { exitCode: number | null; signal?: string; timedOut: boolean; running: boolean }

// ---------------------------------------------------------------- results

/** How a process ended, and its output. Destructures: `const [code, out, err] = r`. */
/** One gate call a process's command made (process/exited's gateCalls,
 * process/gateCall), as `run --json` lists it in calls. */
export declare class GateCallReport {
  constructor(wire: unknown);
  /** The call's id: the callId its gate/call (a runtime gate's) and approval/request had. */
  readonly callId: string;
  /** The gate's name (an unknown gate's: U+FFFD for bytes that are not UTF-8). */
  readonly gate: string;
  /** The gate's name, exact bytes. */
  readonly gateBytes: Uint8Array;
  /** The arguments, exact bytes (secret values read [secret:NAME]). */
  readonly argsBytes: Uint8Array[];
  /** The arguments as text (U+FFFD for bytes that are not UTF-8). */
  readonly args: string[];
  readonly exitCode: number;
  readonly decision: "ran" | "denied" | "rejected" | "timed_out" | "unknown" | "canceled" | (string & {});
  /** Who decided a gate that needed approval ("person", "runtime", "grant", "config", "policy", "timeout", …), else null. */
  readonly decidedBy: string | null;
  /** Seconds. */
  readonly duration: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly error: string | null;
  /** What the gate did on the host (an http gate's requests), at most 32. */
  readonly events: Record<string, unknown>[];
  readonly eventsOmitted: number;
}
export type GateCallCallback = (report: GateCallReport) => unknown;

export declare class RunResult implements Iterable<number | Uint8Array> {
  constructor(exitCode: number, stdout: Uint8Array, stderr: Uint8Array, signal?: string | null, timedOut?: boolean,
    answer?: Uint8Array | null, gateCalls?: GateCallReport[], gateCallsDropped?: number);
  /** The gate calls the command made, in order (the first limits.maxGateCalls). */
  readonly gateCalls: GateCallReport[];
  /** How many more it made. */
  readonly gateCallsDropped: number;
  readonly exitCode: number;
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  /** The signal's name when the exit code is 128+N ("TERM"). */
  readonly signal: string | null;
  /** The process's timeout stopped it (exit code 124). */
  readonly timedOut: boolean;
  /** What the command passed to `submit` (exact bytes), else null. */
  readonly answerBytes: Uint8Array | null;
  readonly answer: string | null;
  readonly ok: boolean;
  readonly stdoutText: string;
  readonly stderrText: string;
  [Symbol.iterator](): Iterator<number | Uint8Array>;
}

// ---------------------------------------------------------------- gates

/** What Call.signal has: the global AbortSignal where the environment's
 * types declare one (lib.dom, @types/node), else these members of it. */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}
export type AbortSignalLike = typeof globalThis extends { AbortSignal: { prototype: infer T } } ? T : CancelSignal;

declare class Call {
  readonly client: Client;
  readonly requestId: unknown;
  readonly callId: string;
  readonly gate: string;
  /** The arguments as text (U+FFFD for bytes that are not UTF-8). */
  readonly args: string[];
  /** The arguments' exact bytes. */
  readonly argsBytes: Uint8Array[];
  readonly sandboxId: string;
  readonly processId: string;
  /** Aborted when the server cancels the call (the caller went away, the deadline passed). */
  readonly signal: AbortSignalLike;
  readonly cancelled: boolean;
  /** The caller's sandbox, when this client opened it. */
  readonly sandbox: Sandbox | undefined;
}

/** One call of a gate from inside a sandbox. */
export declare class GateCall extends Call {
  /** What the caller piped in, or null when nothing was sent. */
  readonly stdin: Uint8Array | null;
  readonly stdinText: string | null;
  /** The caller's working directory as the sandbox sees it (untrusted). */
  readonly cwd: string;
  readonly cwdBytes: Uint8Array;
  /** Unix time in seconds by which the server wants the answer. */
  readonly deadline: number | null;
  /** Seconds until the deadline (null without one). */
  timeLeft(): number | null;
  /** Streams to the caller now (gate/output); false once answered or cancelled. */
  writeStdout(data: Data): boolean;
  writeStderr(data: Data): boolean;
}

/** A grant: calls of gate that run without asking (docs/jsonrpc.md,
 * approval/request). A workspace or always grant the answer gives is kept
 * in the server's grants file, as a person's own. */
export interface Grant {
  gate: string;
  /** exact: these arguments; patterns: one anchored RE2 pattern per argument; any: whatever the gate's policy allows. */
  scope: "exact" | "patterns" | "any";
  exact?: string[];
  /** Present when an element of exact is not UTF-8: its bytes in base64, null for the others. */
  exactBase64?: (string | null)[];
  patterns?: string[];
  lifetime: "session" | "workspace" | "always";
  workspace?: string;
  /** Unix time in milliseconds when it ends. */
  expiresMs?: number;
  /** What it allows, in words (offers only). */
  description?: string;
}

/** The server asks whether a gate that needs approval may run. */
export declare class ApprovalRequest extends Call {
  /** The grants the answer may give, narrowest first (empty from a server before grants). */
  readonly offers: Grant[];
  /** What in the command policy asks, when it is what asks ("" otherwise). */
  readonly rule: string;
  /** The first offer with this lifetime (and scope). */
  offer(lifetime: Grant["lifetime"], scope?: Grant["scope"]): Grant | undefined;
}

/** What a gate function returns: stdout (exit 0), an exit code, or all three. */
export type GateReturn =
  | void | null | undefined | number | Data
  | { exitCode: number; stdout?: Data | null; stderr?: Data | null }
  | [number, (Data | null)?, (Data | null)?];
export type GateFunction = (call: GateCall) => GateReturn | Promise<GateReturn>;

export type ApprovalDecision =
  | Decision | boolean | [Decision, string] | Grant
  | { decision: Decision; reason?: string; grant?: Grant; connectionOnly?: boolean };
export type ApprovalCallback = (req: ApprovalRequest) => ApprovalDecision | Promise<ApprovalDecision>;

export interface GateOptions {
  /** One line, for gate/list and a model's tool list. */
  summary?: string;
  /** E.g. "lookup WORD"; "" makes it from params. */
  usage?: string;
  params?: Param[];
  /** A JSON Schema of an object, instead of params. */
  inputSchema?: unknown;
  /** When the caller's stdin is forwarded (default: the server's, "if-no-args": when the gate is called without arguments). */
  stdin?: StdinMode;
  /** Seconds the client may take to answer (default limits.gateTimeoutMs). */
  timeout?: number;
  /** Ask onApproval before every call. */
  approval?: boolean;
}

// ---------------------------------------------------------------- client

export interface ClientOptions {
  /** Called for every approval/request; without it every approval is denied. */
  onApproval?: ApprovalCallback;
  clientName?: string;
  /** Gate functions and approvals running at once (default 32). */
  gateWorkers?: number;
  /** Server requests waiting for a worker before more are refused (default 1024). */
  maxQueuedCalls?: number;
  /** The longest line taken from the server (default 16 MiB); a longer one closes the connection. */
  maxLineBytes?: number;
}
export interface StartOptions extends ClientOptions {
  /** Default: [$GATEBRIDGE_BIN or "gatebridge", "serve", "--stdio"]. */
  argv?: readonly string[];
  /** The server's environment and working directory. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Where the server's log goes: "inherit" (default), "ignore", "pipe", or a file descriptor. */
  stderr?: "inherit" | "ignore" | "pipe" | number;
}
export interface ConnectOptions extends ClientOptions {
  /** Sent in initialize's authToken (required by `serve --listen`). */
  token?: string;
}
export interface TcpOptions extends ClientOptions {
  /** The contents of the server's token file. */
  token: string;
  /** TLS: true (checked against the system's CAs, or ca/cafile), or tls.connect options of your own. */
  tls?: boolean | object;
  /** PEM of the CA (or self-signed certificate) to trust; implies TLS. */
  ca?: string | Uint8Array;
  /** A PEM file of it; implies TLS. */
  cafile?: string;
  /** The name the certificate must hold (default: host). */
  serverName?: string;
  /** Seconds to connect and finish the TLS handshake (default 30). */
  connectTimeout?: number;
}
export interface SandboxOptions {
  backend?: Backend;
  /** An absolute host directory (default: the current one). */
  workspace?: string;
  writableWorkspace?: boolean;
  image?: string;
  /** The OCI runtime of a docker sandbox ("runsc"). */
  runtime?: string;
  env?: Record<string, string>;
  sandboxId?: string;
}
export type OutputCallback = (stream: Stream, data: Uint8Array) => unknown;
export interface RunOptions {
  /** Fed to the command, then end of file (default: none, /dev/null). */
  stdin?: Data | false;
  /** Seconds: stop it after that long (TERM, then KILL; timedOut is set). */
  timeout?: number;
  cwd?: string;
  env?: Record<string, string>;
  onOutput?: OutputCallback;
  /** Called with each gate call as it is answered (asks for process/gateCall); gateCalls lists them either way. */
  onGateCall?: GateCallCallback;
  processId?: string;
  keepOutput?: boolean;
  /** Run on a pseudo-terminal of this size: one stream (stdout, "\r\n"
   * line ends, stderr merged), write types at it, closeStdin sends
   * end-of-file (Ctrl-D); Process.resize changes the size. */
  tty?: TTYSize;
  /** The argv[0] the command sees (argv[0] stays the program run). */
  arg0?: string;
}
export interface TTYSize {
  rows: number;
  cols: number;
}
export interface ProcessStartOptions extends Omit<RunOptions, "stdin"> {
  /** true (default): a pipe for write/closeStdin; false: /dev/null; data: written, then closed. */
  stdin?: boolean | Data;
}

export declare class LineSplitter {
  constructor(maxBytes: number);
  readonly maxBytes: number;
  /** The complete lines in chunk; throws on a line over maxBytes. */
  push(chunk: Uint8Array): Uint8Array[];
}

export declare class Client {
  private constructor();
  /** Spawns `gatebridge serve --stdio` and initializes the connection. */
  static start(opts?: StartOptions): Promise<Client>;
  /** A client over streams already connected to a server. */
  static connect(readable: unknown, writable: unknown, opts?: ConnectOptions): Promise<Client>;
  /** A client of `gatebridge serve --listen ADDR --token-file FILE`. */
  static connectTcp(host: string, port: number, opts: TcpOptions): Promise<Client>;

  onApproval: ApprovalCallback | undefined;
  readonly serverInfo: Record<string, unknown>;
  readonly protocolVersion: number;
  readonly serverVersion: string;
  readonly backends: BackendInfo[];
  /** The connection's caps, as the server sent them (milliseconds). */
  readonly limits: ConnLimits;
  /** The server's process id (undefined over connect and connectTcp). */
  readonly pid: number | undefined;
  readonly closed: boolean;
  /** The sandboxes this client has open. */
  readonly sandboxes: Sandbox[];

  /** Sends any request; an error response rejects with a GatebridgeError subclass. */
  request(method: string, params?: object, opts?: { timeout?: number }): Promise<any>;
  registerGate(name: string, fn: GateFunction, opts?: GateOptions): Promise<void>;
  unregisterGate(name: string): Promise<void>;
  listGates(): Promise<GateDoc[]>;
  openSandbox(opts?: SandboxOptions): Promise<Sandbox>;
  listProcesses(): Promise<ProcessInfo[]>;
  /** Closes the connection; the server removes every process and sandbox of it. */
  close(opts?: { timeout?: number }): Promise<void>;
}

export declare class Sandbox {
  readonly client: Client;
  readonly id: string;
  /** The backend it runs on ("bwrap", "docker", "local"). */
  readonly backend: string;
  readonly workspace: string;
  /** Where commands see the workspace. */
  readonly workspaceInside: string;
  /** Why this backend (for "auto"). */
  readonly reason: string;
  /** Runs a command to its end: a string under sh -c, an array as an argv. */
  run(command: Command, opts?: RunOptions): Promise<RunResult>;
  /** Starts a command in the background. */
  start(command: Command, opts?: ProcessStartOptions): Promise<Process>;
  /** The files of the workspace (fs/*). */
  readonly fs: SandboxFS;
  /** The whole file (fs.read). */
  readFile(path: FsPath): Promise<Uint8Array>;
  /** Replaces the file atomically (fs.write). */
  writeFile(path: FsPath, data: Data): Promise<void>;
  close(): Promise<void>;
}

/** A workspace path: relative to it or absolute as its commands see it;
 * bytes for a name that is not UTF-8. */
export type FsPath = string | Uint8Array;

/** One entry of SandboxFS.list or .stat (a link is described, not followed). */
export interface FileInfo {
  /** The name (list) or the path asked for (stat); nameBytes is exact. */
  name: string;
  nameBytes: Uint8Array;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  /** Permission bits. */
  mode: number;
  /** Last modification, seconds since the epoch (0: unknown). */
  mtime: number;
  isFile: boolean;
  isDirectory: boolean;
  isSymlink: boolean;
}

/** The files of a sandbox's workspace, one small function per fs/* method. */
export declare class SandboxFS {
  readonly sandbox: Sandbox;
  /** fs/read: up to length bytes (0: one chunk) from offset. */
  readChunk(path: FsPath, offset?: number, length?: number): Promise<{ data: Uint8Array; size: number; eof: boolean }>;
  /** The whole file, chunk by chunk. */
  read(path: FsPath): Promise<Uint8Array>;
  /** fs/write: replaces the file atomically (over one chunk: a temporary file renamed over it). */
  write(path: FsPath, data: Data): Promise<void>;
  /** fs/write with append. */
  append(path: FsPath, data: Data): Promise<void>;
  /** fs/write at an offset (one chunk at most). */
  writeAt(path: FsPath, offset: number, data: Data): Promise<void>;
  /** fs/list, sorted by name. */
  list(path?: FsPath): Promise<FileInfo[]>;
  /** fs/stat. */
  stat(path: FsPath): Promise<FileInfo>;
  exists(path: FsPath): Promise<boolean>;
  /** fs/remove. */
  remove(path: FsPath, opts?: { recursive?: boolean; force?: boolean }): Promise<void>;
  /** fs/mkdir. */
  mkdir(path: FsPath, opts?: { recursive?: boolean }): Promise<void>;
  /** fs/rename. */
  rename(path: FsPath, newPath: FsPath, opts?: { overwrite?: boolean }): Promise<void>;
}

export declare class Process implements AsyncIterable<Chunk> {
  readonly client: Client;
  readonly sandbox: Sandbox;
  readonly id: string;
  readonly argv: string[];
  onOutput: OutputCallback | undefined;
  onGateCall: GateCallCallback | undefined;
  /** Once exited, the gate calls process/exited lists; before, those reported so far (onGateCall). */
  readonly gateCalls: GateCallReport[];
  readonly running: boolean;
  readonly exitCode: number | null;
  /** The output received so far (with keepOutput). */
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  write(data: Data): Promise<void>;
  closeStdin(): Promise<void>;
  /** false if it had already exited. */
  signal(sig?: SignalName | 1 | 2 | 9 | 15): Promise<boolean>;
  /** process/resize (started with tty); false if it had already exited. */
  resize(rows: number, cols: number): Promise<boolean>;
  terminate(): Promise<boolean>;
  kill(): Promise<boolean>;
  wait(opts?: { timeout?: number }): Promise<RunResult>;
  /** The chunks as they come, to the exit (with keepOutput, those so far first). */
  output(): AsyncGenerator<Chunk, void, undefined>;
  [Symbol.asyncIterator](): AsyncGenerator<Chunk, void, undefined>;
  read(opts?: { afterSeq?: number; maxBytes?: number; wait?: number }): Promise<ReadResult>;
  snapshot(): Promise<Snapshot>;
  /** process/wait on the server, up to timeout seconds. */
  status(opts?: { timeout?: number }): Promise<WaitStatus>;
}

/** $GATEBRIDGE_BIN, else "gatebridge". */
export declare function defaultBinary(): string;
