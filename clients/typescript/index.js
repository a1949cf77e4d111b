// @ts-check
/**
 * A JavaScript/TypeScript client for `gatebridge serve` (`--stdio` or
 * `--listen`). One file, no dependencies, Node >= 20, ESM; the types are
 * in index.d.ts (hand-written; `make test-clients` checks this file
 * against its JSDoc with tsc).
 *
 * gatebridge runs untrusted shell commands in a sandbox (bubblewrap,
 * Docker, or a plain process) and puts *gates* on the sandbox's PATH:
 * commands that call back to the host. With this client a Node agent
 * runtime opens sandboxes, runs commands in them (streamed output, stdin,
 * signals, timeouts) and answers gates itself, with async functions.
 *
 * The same surface as the Python client (clients/python), in camelCase;
 * times are in seconds (the protocol's are milliseconds). The protocol:
 * docs/jsonrpc.md and docs/protocol.schema.json.
 *
 * Adding a method of the protocol is one small function: a wrapper around
 * `client.request(method, params)`; a new notification or server request
 * is one entry in NOTIFICATIONS or SERVER_REQUESTS below.
 */

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";

export const VERSION = "0.1.0";
/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

// JSON-RPC and gatebridge error codes (docs/jsonrpc.md §6).
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
export const NOT_FOUND = -32001;
export const NOT_INITIALIZED = -32002;
export const LIMIT = -32003;
export const UNAVAILABLE = -32004;
export const CONFLICT = -32005;
export const UNAUTHORIZED = -32006;
/** process/start refused by the command policy; data names the command and the rule. */
export const POLICY_DENIED = -32007;
export const REQUEST_CANCELLED = -32800;
/** Client-side only: the connection to the server is gone. */
export const CONNECTION_CLOSED = -32099;
/** The code of the error this client answers when a gate function throws. */
export const GATE_FAILED = -32000;

/** The longest line the client takes from the server by default: the
 * server's own cap on a message (limits.maxMessageBytes, 16 MiB). A longer
 * one closes the connection (a server that sends it is broken or hostile). */
export const DEFAULT_MAX_LINE_BYTES = 16 << 20;

const DECISIONS = ["allow", "deny", "allowForSession"];
/** @type {Record<string, string>} */
const SIGNAL_NUMBERS = { 1: "HUP", 2: "INT", 9: "KILL", 15: "TERM" };
const SIGNALS = ["INT", "TERM", "KILL", "HUP"];
// Raw bytes per process/write message (base64 grows it by 4/3; the
// server's message cap is 16 MiB by default).
const WRITE_CHUNK = 1 << 20;

// ---------------------------------------------------------------- errors

/** An error response from the server (or, with code CONNECTION_CLOSED, a
 * lost connection). `data` is the response's data; `hint` its hint. */
export class GatebridgeError extends Error {
  /**
   * @param {number} code
   * @param {string} message
   * @param {unknown} [data]
   */
  constructor(code, message, data) {
    super(message);
    this.name = "GatebridgeError";
    this.code = code;
    this.data = data;
  }

  /** @returns {string | undefined} */
  get hint() {
    const d = /** @type {any} */ (this.data);
    return d && typeof d === "object" && typeof d.hint === "string" && d.hint ? d.hint : undefined;
  }

  toString() {
    let s = `${this.name}: ${this.message} (code ${this.code})`;
    if (this.hint) s += `; hint: ${this.hint}`;
    return s;
  }
}

/** @param {string} name @param {number} code */
function errorClass(name, code) {
  const C = class extends GatebridgeError {
    /** @param {string} message @param {unknown} [data] */
    constructor(message, data) {
      super(code, message, data);
      this.name = name;
    }
  };
  Object.defineProperty(C, "name", { value: name });
  Object.defineProperty(C, "code", { value: code });
  return C;
}

export const ParseError = errorClass("ParseError", PARSE_ERROR);
export const InvalidRequestError = errorClass("InvalidRequestError", INVALID_REQUEST);
export const MethodNotFoundError = errorClass("MethodNotFoundError", METHOD_NOT_FOUND);
export const InvalidParamsError = errorClass("InvalidParamsError", INVALID_PARAMS);
export const InternalError = errorClass("InternalError", INTERNAL_ERROR);
export const NotFoundError = errorClass("NotFoundError", NOT_FOUND);
export const NotInitializedError = errorClass("NotInitializedError", NOT_INITIALIZED);
export const LimitError = errorClass("LimitError", LIMIT);
export const UnavailableError = errorClass("UnavailableError", UNAVAILABLE);
export const ConflictError = errorClass("ConflictError", CONFLICT);
export const UnauthorizedError = errorClass("UnauthorizedError", UNAUTHORIZED);
/** The command policy refused the command before it started (data: kind policy_denied, decision, rule, command). */
export const PolicyDeniedError = errorClass("PolicyDeniedError", POLICY_DENIED);
export const RequestCancelledError = errorClass("RequestCancelledError", REQUEST_CANCELLED);
/** The connection to the server is gone: it exited, or the client was closed. */
export const ConnectionClosedError = errorClass("ConnectionClosedError", CONNECTION_CLOSED);

const ERROR_CLASSES = [
  ParseError, InvalidRequestError, MethodNotFoundError, InvalidParamsError, InternalError, NotFoundError,
  NotInitializedError, LimitError, UnavailableError, ConflictError, UnauthorizedError, PolicyDeniedError,
  RequestCancelledError, ConnectionClosedError,
];
/** @type {Map<number, typeof ParseError>} */
const BY_CODE = new Map(ERROR_CLASSES.map((C) => [/** @type {any} */ (C).code, C]));

/** The typed error of a code (GatebridgeError for a code without a class).
 * @param {number} code @param {string} message @param {unknown} [data]
 * @returns {GatebridgeError} */
export function errorFor(code, message, data) {
  const C = BY_CODE.get(code);
  return C ? new C(message, data) : new GatebridgeError(code, message, data);
}

/** A wait (Process.wait, request with a timeout) ran out of time. */
export class TimeoutError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "TimeoutError";
  }
}

// ---------------------------------------------------------------- helpers

/** @typedef {string | Uint8Array} Data */

/** @param {Data | null | undefined} data @returns {Buffer} */
function toBuffer(data) {
  if (data == null) return Buffer.alloc(0);
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`want a string or a Uint8Array, got ${typeof data}`);
}

/** @param {Data} data */
const b64 = (data) => toBuffer(data).toString("base64");
/** @param {unknown} s */
const unb64 = (s) => (typeof s === "string" && s ? Buffer.from(s, "base64") : Buffer.alloc(0));

/** The exact bytes of a string field and its base64 sibling (docs/json.md,
 * "Bytes that are not UTF-8").
 * @param {unknown} s @param {unknown} sibling @returns {Buffer} */
function exactBytes(s, sibling) {
  if (typeof sibling === "string") return Buffer.from(sibling, "base64");
  return Buffer.from(typeof s === "string" ? s : "", "utf8");
}

/** @param {unknown} ss @param {unknown} siblings @returns {Buffer[]} */
function exactList(ss, siblings) {
  const list = Array.isArray(ss) ? ss : [];
  if (!Array.isArray(siblings) || siblings.length === 0) return list.map((s) => exactBytes(s, undefined));
  if (siblings.length !== list.length) {
    throw new Error(`${list.length} arguments but ${siblings.length} entries in argsBase64`);
  }
  return list.map((s, i) => exactBytes(s, siblings[i]));
}

/** A string command runs under POSIX sh; an array is an argv.
 * @param {string | readonly string[]} command @returns {string[]} */
function argvOf(command) {
  if (typeof command === "string") return ["sh", "-c", command];
  if (!Array.isArray(command) || command.length === 0) throw new TypeError("empty command");
  return command.map((a) => String(a));
}

/** @param {Record<string, string> | undefined} env */
function checkEnv(env) {
  if (env == null) return undefined;
  /** @type {Record<string, string>} */
  const out = {};
  for (const [k, v] of Object.entries(env)) {
    if (typeof v !== "string") throw new TypeError("env must map strings to strings");
    out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

/** @param {string | number} sig @returns {string} */
function signalName(sig) {
  let name = typeof sig === "number" ? SIGNAL_NUMBERS[sig] || String(sig) : String(sig).toUpperCase();
  if (name.startsWith("SIG")) name = name.slice(3);
  if (!SIGNALS.includes(name)) throw new TypeError(`signal ${sig}: use one of ${SIGNALS.join(", ")}`);
  return name;
}

/** Seconds to whole milliseconds (undefined stays undefined).
 * @param {number | undefined | null} s @param {string} what */
function ms(s, what) {
  if (s == null) return undefined;
  if (typeof s !== "number" || !(s >= 0) || !Number.isFinite(s)) throw new TypeError(`${what}: want seconds >= 0`);
  return Math.max(1, Math.round(s * 1000));
}

/** @param {number} s */
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));

/** The gatebridge binary Client.start runs by default: $GATEBRIDGE_BIN,
 * else gatebridge from PATH. */
export function defaultBinary() {
  return process.env.GATEBRIDGE_BIN || "gatebridge";
}

// ---------------------------------------------------------------- results

/** One gate call a process's command made, as process/exited's gateCalls
 * (and process/gateCall) report it, like `run --json`'s calls: arguments
 * exact (argsBytes; secret values read [secret:NAME]), the decision
 * ("ran", "denied", "rejected", "timed_out", "unknown", "canceled"), who
 * decided a gate that needed approval (decidedBy, or null), the duration
 * in seconds, and what the gate did on the host (events). */
export class GateCallReport {
  /** @param {any} c the wire object */
  constructor(c) {
    /** @type {string} */ this.callId = String(c?.callId ?? "");
    /** @type {string} */ this.gate = String(c?.gate ?? "");
    /** The gate's name, exact bytes (an unknown gate's may be any). */
    this.gateBytes = exactBytes(c?.gate, c?.gateBase64);
    /** The arguments, exact bytes. */
    this.argsBytes = exactList(c?.args, c?.argsBase64);
    /** The arguments as text (U+FFFD for bytes that are not UTF-8). */
    this.args = this.argsBytes.map((b) => b.toString("utf8"));
    /** @type {number} */ this.exitCode = Number(c?.exitCode ?? 0);
    /** @type {string} */ this.decision = String(c?.decision ?? "");
    /** @type {string | null} */ this.decidedBy = typeof c?.decidedBy === "string" && c.decidedBy ? c.decidedBy : null;
    /** Seconds. */
    this.duration = (Number(c?.durationMs) || 0) / 1000;
    /** @type {number} */ this.bytesIn = Number(c?.bytesIn ?? 0);
    /** @type {number} */ this.bytesOut = Number(c?.bytesOut ?? 0);
    /** @type {string | null} */ this.error = typeof c?.error === "string" && c.error ? c.error : null;
    /** @type {Record<string, unknown>[]} */
    this.events = Array.isArray(c?.events) ? c.events.filter((/** @type {unknown} */ e) => e != null && typeof e === "object") : [];
    /** @type {number} */ this.eventsOmitted = Number(c?.eventsOmitted ?? 0);
  }
}

/** The report of a wire object, or null (with a warning) for one that is
 * malformed: a bad report from the server loses that report only.
 * @param {unknown} c @returns {GateCallReport | null} */
function gateCallReport(c) {
  if (c == null || typeof c !== "object") return null;
  try {
    return new GateCallReport(c);
  } catch (e) {
    console.warn("gatebridge-client: a malformed gate-call report ignored:", e);
    return null;
  }
}

/** The reports of a process/exited, and how many were dropped.
 * @param {any} e @returns {[GateCallReport[], number]} */
function gateCallsOf(e) {
  const list = Array.isArray(e?.gateCalls) ? e.gateCalls : [];
  const out = [];
  for (const c of list) {
    const r = gateCallReport(c);
    if (r) out.push(r);
  }
  return [out, Number(e?.gateCallsDropped ?? 0) || 0];
}

/** How a process ended, and its output (Buffers). */
export class RunResult {
  /**
   * @param {number} exitCode @param {Buffer} stdout @param {Buffer} stderr
   * @param {string | null} signal @param {boolean} timedOut
   * @param {Buffer | null} answer
   * @param {GateCallReport[]} gateCalls @param {number} gateCallsDropped
   */
  constructor(exitCode, stdout, stderr, signal = null, timedOut = false, answer = null, gateCalls = [], gateCallsDropped = 0) {
    this.exitCode = exitCode;
    this.stdout = stdout;
    this.stderr = stderr;
    /** The signal's name when the exit code is 128+N ("TERM"). */
    this.signal = signal;
    /** The process's timeout stopped it. */
    this.timedOut = timedOut;
    /** What the command passed to `submit` (exact bytes), else null. */
    this.answerBytes = answer;
    /** The gate calls the command made, in order (the server lists the first limits.maxGateCalls). */
    this.gateCalls = gateCalls;
    /** How many more it made. */
    this.gateCallsDropped = gateCallsDropped;
  }
  get ok() { return this.exitCode === 0; }
  get stdoutText() { return this.stdout.toString("utf8"); }
  get stderrText() { return this.stderr.toString("utf8"); }
  /** The answer as text (U+FFFD for bytes that are not UTF-8), or null. */
  get answer() { return this.answerBytes == null ? null : this.answerBytes.toString("utf8"); }
  /** Destructures like Python's tuple: `const [code, out, err] = r`. */
  *[Symbol.iterator]() { yield this.exitCode; yield this.stdout; yield this.stderr; }
}

// ---------------------------------------------------------------- gates

class Call {
  /** @param {Client} client @param {unknown} requestId @param {any} params */
  constructor(client, requestId, params) {
    this.client = client;
    this.requestId = requestId;
    /** @type {string} */ this.callId = String(params.callId ?? "");
    /** @type {string} */ this.gate = String(params.gate ?? "");
    /** The arguments, exact bytes. */
    this.argsBytes = exactList(params.args, params.argsBase64);
    /** The arguments as text (U+FFFD for bytes that are not UTF-8: use argsBytes to tell them apart). */
    this.args = this.argsBytes.map((b) => b.toString("utf8"));
    /** @type {string} */ this.sandboxId = String(params.sandboxId ?? "");
    /** @type {string} */ this.processId = String(params.processId ?? "");
    this._abort = new AbortController();
    /** Aborted when the server cancels the call (the caller went away, the deadline passed). */
    this.signal = this._abort.signal;
  }
  get cancelled() { return this.signal.aborted; }
  /** The sandbox the caller runs in (undefined if unknown). */
  get sandbox() { return this.client._sandboxes.get(this.sandboxId); }
  _cancel() { if (!this._abort.signal.aborted) this._abort.abort(new RequestCancelledError("request cancelled")); }
}

/** One call of a gate from inside a sandbox, as a gate function sees it. */
export class GateCall extends Call {
  /** @param {Client} client @param {unknown} requestId @param {any} params */
  constructor(client, requestId, params) {
    super(client, requestId, params);
    /** What the caller piped in, or null when nothing was sent. */
    this.stdin = params.stdin == null ? null : unb64(params.stdin);
    this.cwdBytes = exactBytes(params.cwd, params.cwdBase64);
    /** The caller's working directory as the sandbox sees it (untrusted). */
    this.cwd = this.cwdBytes.toString("utf8");
    /** Unix time in seconds by which the server wants the answer (null without one). */
    this.deadline = typeof params.deadlineMs === "number" && params.deadlineMs ? params.deadlineMs / 1000 : null;
    this._answered = false;
  }
  get stdinText() { return this.stdin == null ? null : this.stdin.toString("utf8"); }
  /** Seconds until the deadline (null without one). */
  timeLeft() { return this.deadline == null ? null : Math.max(0, this.deadline - Date.now() / 1000); }
  /** Sends data to the caller's stdout now (gate/output); false once the call is answered or cancelled.
   * @param {Data} data */
  writeStdout(data) { return this._write("stdout", data); }
  /** @param {Data} data */
  writeStderr(data) { return this._write("stderr", data); }
  /** @param {string} stream @param {Data} data */
  _write(stream, data) {
    const b = toBuffer(data);
    if (this._answered || this.cancelled || this.client.closed) return false;
    if (b.length === 0) return true;
    return this.client._notify("gate/output", { callId: this.callId, stream, chunk: b.toString("base64") });
  }
}

/** The server asks whether a gate that needs approval may run (one
 * registered with approval, a configured gate with approval: ask, or one
 * the command policy marks ask: rule then says which rule). offers are the
 * grants the answer may give, narrowest first, as the protocol has them
 * ({gate, scope, exact, exactBase64, patterns, lifetime, workspace,
 * expiresMs, description}); the callback may return one (allow and keep
 * it) or {decision: "allow", grant, connectionOnly}. */
export class ApprovalRequest extends Call {
  /** @param {Client} client @param {unknown} requestId @param {any} params */
  constructor(client, requestId, params) {
    super(client, requestId, params);
    /** @type {any[]} */
    this.offers = Array.isArray(params.offers) ? params.offers : [];
    /** @type {string} */ this.rule = String(params.rule ?? "");
  }
  /** The first offer with this lifetime (and scope), or undefined.
   * @param {string} lifetime @param {string} [scope] */
  offer(lifetime, scope) {
    return this.offers.find((o) => o && o.lifetime === lifetime && (scope === undefined || o.scope === scope));
  }
}

/** What a gate function returned → [exitCode, stdout, stderr].
 * @param {unknown} ret @returns {[number, Buffer, Buffer]} */
function gateResult(ret) {
  const bad = () => new TypeError(
    "a gate returned " + (ret === null ? "null" : typeof ret) +
    ": return a number (exit code), a string or bytes (stdout), {exitCode, stdout, stderr} or [exitCode, stdout, stderr]");
  if (ret == null) return [0, Buffer.alloc(0), Buffer.alloc(0)];
  /** @type {unknown[]} */
  let parts;
  if (typeof ret === "number") parts = [ret];
  else if (typeof ret === "string" || ret instanceof Uint8Array) parts = [0, ret];
  else if (Array.isArray(ret) && ret.length >= 1 && ret.length <= 3) parts = ret;
  else if (typeof ret === "object" && "exitCode" in ret) {
    const o = /** @type {any} */ (ret);
    parts = [o.exitCode, o.stdout, o.stderr];
  } else throw bad();
  const code = parts[0];
  if (typeof code !== "number" || !Number.isInteger(code)) throw bad();
  if (code < 0 || code > 255) throw new RangeError(`a gate's exit code must be 0-255, got ${code}`);
  return [code, toBuffer(/** @type {any} */ (parts[1])), toBuffer(/** @type {any} */ (parts[2]))];
}

// ---------------------------------------------------------------- framing

/** Splits a byte stream into lines, holding at most maxBytes of one line.
 * Returns the complete lines of each chunk; throws on a longer line. */
export class LineSplitter {
  /** @param {number} maxBytes */
  constructor(maxBytes) {
    this.maxBytes = maxBytes;
    /** @type {Buffer[]} */
    this._parts = [];
    this._size = 0;
  }
  /** @param {Buffer} chunk @returns {Buffer[]} */
  push(chunk) {
    /** @type {Buffer[]} */
    const lines = [];
    let start = 0;
    for (;;) {
      const i = chunk.indexOf(10, start);
      if (i < 0) break;
      const piece = chunk.subarray(start, i);
      this._check(piece.length);
      lines.push(this._parts.length ? Buffer.concat([...this._parts, piece]) : piece);
      this._parts = [];
      this._size = 0;
      start = i + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this._check(rest.length);
      this._parts.push(Buffer.from(rest)); // a copy: the chunk's memory is not kept whole
      this._size += rest.length;
    }
    return lines;
  }
  /** @param {number} n */
  _check(n) {
    if (this._size + n > this.maxBytes) {
      this._parts = [];
      this._size = 0;
      throw new Error(`the server sent a line over ${this.maxBytes} bytes (maxLineBytes)`);
    }
  }
}

// ---------------------------------------------------------------- client

/** @typedef {{ resolve: (v: any) => void, reject: (e: any) => void, method: string }} Pending */

/** Notifications from the server: method → handler. */
const NOTIFICATIONS = {
  /** @param {Client} c @param {any} p */
  "process/output": (c, p) => c._processes.get(p.processId)?._onOutput(Number(p.seq) || 0, String(p.stream ?? ""), unb64(p.chunk)),
  /** @param {Client} c @param {any} p */
  "process/gateCall": (c, p) => {
    const r = gateCallReport(p?.call);
    if (r) c._processes.get(p.processId)?._onGateCall(r);
  },
  /** @param {Client} c @param {any} p */
  "process/exited": (c, p) => {
    const proc = c._processes.get(p.processId);
    if (!proc) return;
    c._processes.delete(p.processId);
    proc._onExit(p);
  },
  /** @param {Client} c @param {any} p */
  "$/cancelRequest": (c, p) => c._calls.get(JSON.stringify(p?.id))?._cancel(),
};

/** Requests from the server: method → handler (answers with a result or throws). */
const SERVER_REQUESTS = {
  /** @param {Client} c @param {unknown} id @param {any} p */
  "gate/call": (c, id, p) => c._runGate(new GateCall(c, id, p)),
  /** @param {Client} c @param {unknown} id @param {any} p */
  "approval/request": (c, id, p) => c._runApproval(new ApprovalRequest(c, id, p)),
};

/** A connection to a gatebridge server. Make one with Client.start
 * (spawns `gatebridge serve --stdio`), Client.connectTcp (`serve
 * --listen`) or Client.connect (streams you have); close it with close(). */
export class Client {
  /** @param {any} [opts] @private */
  constructor(opts = {}) {
    this.onApproval = opts.onApproval;
    this._maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this._gateWorkers = Math.max(1, opts.gateWorkers ?? 32);
    this._maxQueuedCalls = opts.maxQueuedCalls ?? 1024;
    this._nextId = 1;
    /** @type {Map<number, Pending>} */
    this._pending = new Map();
    /** @type {Map<string, (call: GateCall) => unknown>} */
    this._gates = new Map();
    /** @type {Map<string, Sandbox>} */
    this._sandboxes = new Map();
    /** @type {Map<string, Process>} */
    this._processes = new Map();
    /** @type {Map<string, Call>} */
    this._calls = new Map();
    /** @type {(() => void)[]} */
    this._queued = [];
    this._running = 0;
    this._sandboxSeq = 0;
    this._processSeq = 0;
    /** @type {GatebridgeError | null} */
    this._closedError = null;
    this._closing = false;
    this._writerEnded = false;
    /** @type {any} */
    this._lastUnmatchedError = null;
    /** @type {import("node:child_process").ChildProcess | null} */
    this._child = null;
    /** @type {net.Socket | null} */
    this._socket = null;
    /** @type {NodeJS.WritableStream | null} */
    this._writer = null;
    /** @type {(() => void) | null} */
    this._lostResolve = null;
    /** Resolves once the connection is gone (the server's side closed). */
    this._lost = new Promise((r) => { this._lostResolve = () => r(undefined); });
    /** @type {any} */ this.serverInfo = {};
    this.protocolVersion = PROTOCOL_VERSION;
    this.serverVersion = "";
    /** @type {any[]} */ this.backends = [];
    /** @type {any} */ this.limits = {};
  }

  /** Spawns `gatebridge serve --stdio` and initializes the connection.
   * @param {any} [opts] @returns {Promise<Client>} */
  static async start(opts = {}) {
    const argv = opts.argv ?? [defaultBinary(), "serve", "--stdio"];
    const c = new Client(opts);
    const child = spawn(argv[0], argv.slice(1), {
      stdio: ["pipe", "pipe", opts.stderr ?? "inherit"],
      env: opts.env, cwd: opts.cwd,
    });
    await new Promise((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (/** @type {any} */ e) => reject(e.code === "ENOENT"
        ? new Error(`${argv[0]}: cannot start the gatebridge server (build it with \`make build\`, then set ` +
          "GATEBRIDGE_BIN=/path/to/bin/gatebridge or put gatebridge on PATH)", { cause: e })
        : e));
    });
    c._child = child;
    child.stdin?.on("error", () => {}); // EPIPE when the server died: the reader reports it
    await c._setup(/** @type {any} */ (child.stdout), /** @type {any} */ (child.stdin), opts);
    return c;
  }

  /** A client over streams already connected to a server (its output to
   * read, its input to write). `token` is sent in initialize's authToken.
   * @param {NodeJS.ReadableStream} readable @param {NodeJS.WritableStream} writable @param {any} [opts] */
  static async connect(readable, writable, opts = {}) {
    const c = new Client(opts);
    await c._setup(readable, writable, opts);
    return c;
  }

  /** A client of `gatebridge serve --listen HOST:PORT --token-file FILE`.
   * @param {string} host @param {number} port @param {any} opts */
  static async connectTcp(host, port, opts) {
    if (!opts || !opts.token) throw new TypeError("connectTcp needs the server's token (the contents of its --token-file)");
    const timeout = ms(opts.connectTimeout ?? 30, "connectTimeout");
    const useTls = !!(opts.tls || opts.ca || opts.cafile);
    /** @type {net.Socket} */
    const sock = await new Promise((resolve, reject) => {
      /** @type {net.Socket} */
      let s;
      const fail = (/** @type {Error} */ e) => { s.destroy(); reject(e); };
      if (useTls) {
        /** @type {tls.ConnectionOptions} */
        const o = { host, port, minVersion: "TLSv1.2", ...(typeof opts.tls === "object" ? opts.tls : {}) };
        if (opts.cafile) o.ca = readFileSync(opts.cafile);
        if (opts.ca) o.ca = opts.ca;
        const name = opts.serverName ?? host;
        if (!net.isIP(name)) o.servername = name;
        else if (opts.serverName) o.checkServerIdentity = (_h, cert) => tls.checkServerIdentity(name, cert);
        s = tls.connect(o, () => { s.setTimeout(0); resolve(s); });
      } else {
        s = net.connect({ host, port }, () => { s.setTimeout(0); resolve(s); });
      }
      s.setTimeout(timeout ?? 30000, () => fail(new TimeoutError(`connecting to ${host}:${port}: no answer within ${opts.connectTimeout ?? 30}s`)));
      s.once("error", fail);
    });
    sock.removeAllListeners("error");
    sock.on("error", () => {}); // reported as the end of the stream
    const c = new Client(opts);
    c._socket = sock;
    await c._setup(sock, sock, opts);
    return c;
  }

  /** @param {NodeJS.ReadableStream} readable @param {NodeJS.WritableStream} writable @param {any} opts */
  async _setup(readable, writable, opts) {
    this._writer = writable;
    const lines = new LineSplitter(this._maxLineBytes);
    let why = "the gatebridge server closed the connection";
    const onData = (/** @type {Buffer} */ chunk) => {
      let got;
      try {
        got = lines.push(chunk);
      } catch (e) {
        why = /** @type {Error} */ (e).message;
        readable.removeListener("data", onData);
        this._abortTransport();
        ended();
        return;
      }
      for (const line of got) this._handleLine(line);
    };
    let done = false;
    const ended = () => {
      if (done) return;
      done = true;
      void this._ended(why);
    };
    readable.on("data", onData);
    readable.on("end", ended);
    readable.on("close", ended);
    readable.on("error", (/** @type {Error} */ e) => { why = `reading from the gatebridge server failed: ${e.message}`; ended(); });
    /** @type {any} */
    const init = { clientName: opts.clientName ?? "gatebridge-client.js", protocolVersion: PROTOCOL_VERSION };
    if (opts.token != null) init.authToken = opts.token;
    let res;
    try {
      res = await this.request("initialize", init, { timeout: 60 });
      this._notify("initialized", {});
    } catch (e) {
      await this.close();
      throw e;
    }
    this.serverInfo = res ?? {};
    this.protocolVersion = this.serverInfo.protocolVersion ?? PROTOCOL_VERSION;
    this.serverVersion = this.serverInfo.serverVersion ?? "";
    this.backends = Array.isArray(this.serverInfo.backends) ? this.serverInfo.backends : [];
    this.limits = this.serverInfo.limits ?? {};
  }

  /** The connection is gone (the server closed it, or the line cap hit).
   * @param {string} why */
  async _ended(why) {
    const child = this._child;
    const plain = why === "the gatebridge server closed the connection";
    if (child && !this._closing && plain) {
      if (child.exitCode == null && child.signalCode == null) {
        await Promise.race([new Promise((r) => child.once("exit", r)), sleep(10)]);
      }
      if (child.exitCode != null) why = `the gatebridge server exited (exit code ${child.exitCode})`;
      else if (child.signalCode != null) why = `the gatebridge server was killed (${child.signalCode})`;
    } else if (this._closing && plain) {
      why = "the client was closed";
    }
    const last = this._lastUnmatchedError;
    if (last && !this._closing) why += `: ${last.message} (code ${last.code})`;
    this._connectionLost(new ConnectionClosedError(why));
  }

  _abortTransport() {
    if (this._socket) this._socket.destroy();
    else if (this._child) {
      this._child.stdout?.destroy();
      this._child.stdin?.destroy();
    }
  }

  /** @param {GatebridgeError} err */
  _connectionLost(err) {
    if (!this._closedError) this._closedError = err;
    const e = this._closedError;
    const pending = [...this._pending.values()];
    this._pending.clear();
    for (const p of pending) p.reject(fresh(e));
    for (const c of this._calls.values()) c._cancel();
    const procs = [...this._processes.values()];
    this._processes.clear();
    for (const p of procs) p._onLost(e);
    this._queued = [];
    this._lostResolve?.();
  }

  /** The server's process id (undefined over connect and connectTcp). */
  get pid() { return this._child?.pid; }
  get closed() { return this._closedError != null; }
  /** The sandboxes this client has open. */
  get sandboxes() { return [...this._sandboxes.values()]; }

  // -- requests

  /** Sends a request and resolves to its result; an error response rejects
   * with a GatebridgeError (a subclass by code). The low-level way to any method.
   * @param {string} method @param {object} [params] @param {{timeout?: number}} [opts] */
  request(method, params = {}, opts = {}) {
    if (this._closedError) return Promise.reject(fresh(this._closedError));
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      /** @type {NodeJS.Timeout | undefined} */
      let timer;
      const settle = (/** @type {Function} */ f) => (/** @type {any} */ v) => { if (timer) clearTimeout(timer); f(v); };
      this._pending.set(id, { resolve: settle(resolve), reject: settle(reject), method });
      if (opts.timeout != null) {
        timer = setTimeout(() => {
          this._pending.delete(id);
          reject(new TimeoutError(`${method}: no response within ${opts.timeout}s`));
        }, (ms(opts.timeout, "timeout") ?? 0));
      }
      if (!this._send({ jsonrpc: "2.0", id, method, params })) {
        this._pending.delete(id);
        if (timer) clearTimeout(timer);
        reject(fresh(this._closedError ?? new ConnectionClosedError("the connection is closed")));
      }
    });
  }

  /** @param {string} method @param {object} params */
  _notify(method, params) {
    return this._send({ jsonrpc: "2.0", method, params });
  }

  /** @param {object} msg @returns {boolean} whether it was sent */
  _send(msg) {
    if (this._closedError || !this._writer || this._writerEnded) return false;
    try {
      this._writer.write(JSON.stringify(msg) + "\n");
      return true;
    } catch {
      return false;
    }
  }

  /** @param {unknown} id @param {unknown} result @param {GatebridgeError} [error] */
  _respond(id, result, error) {
    if (error) {
      /** @type {any} */
      const err = { code: error.code, message: error.message };
      if (error.data !== undefined) err.data = error.data;
      this._send({ jsonrpc: "2.0", id, error: err });
    } else {
      this._send({ jsonrpc: "2.0", id, result });
    }
  }

  // -- reading

  /** @param {Buffer} line */
  _handleLine(line) {
    const text = line.toString("utf8").trim();
    if (!text) return;
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      console.warn(`gatebridge-client: the server sent a line that is not JSON: ${JSON.stringify(text.slice(0, 200))}`);
      return;
    }
    if (!msg || typeof msg !== "object" || Array.isArray(msg)) return;
    try {
      this._dispatch(msg);
    } catch (e) {
      console.warn("gatebridge-client: handling a message:", e);
    }
  }

  /** @param {any} msg */
  _dispatch(msg) {
    const method = msg.method;
    if (method == null) return this._onResponse(msg);
    const params = msg.params && typeof msg.params === "object" ? msg.params : {};
    if (msg.id != null) {
      const h = Object.hasOwn(SERVER_REQUESTS, method) ? SERVER_REQUESTS[/** @type {keyof SERVER_REQUESTS} */ (method)] : null;
      if (!h) return this._respond(msg.id, undefined, new MethodNotFoundError(`method not found: ${JSON.stringify(method)}`));
      return this._schedule(msg.id, () => h(this, msg.id, params));
    }
    const n = Object.hasOwn(NOTIFICATIONS, method) ? NOTIFICATIONS[/** @type {keyof NOTIFICATIONS} */ (method)] : null;
    if (n) n(this, params);
  }

  /** @param {any} msg */
  _onResponse(msg) {
    const err = msg.error;
    const p = typeof msg.id === "number" ? this._pending.get(msg.id) : undefined;
    if (!p) {
      if (err) this._lastUnmatchedError = typeof err === "object" ? err : { code: INTERNAL_ERROR, message: String(err) };
      return;
    }
    this._pending.delete(msg.id);
    if (err != null) {
      const e = typeof err === "object" ? err : { code: INTERNAL_ERROR, message: String(err) };
      p.reject(errorFor(Number.isInteger(e.code) ? e.code : INTERNAL_ERROR, String(e.message ?? ""), e.data));
    } else {
      p.resolve(msg.result);
    }
  }

  /** Runs a server request's handler, at most gateWorkers at once; beyond
   * maxQueuedCalls waiting, a request is answered with an error at once
   * (a hostile server cannot make the client hold them without bound).
   * @param {unknown} id @param {() => Promise<void>} run */
  _schedule(id, run) {
    if (this._running >= this._gateWorkers && this._queued.length >= this._maxQueuedCalls) {
      return this._respond(id, undefined, new LimitError(`the client has ${this._queued.length} calls waiting (maxQueuedCalls)`));
    }
    const go = () => {
      this._running++;
      // A malformed request (its params fail to parse) is answered with an
      // error, and its slot is given back.
      (async () => run())().catch((e) => {
        this._respond(id, undefined, new InvalidParamsError(`the client could not take this request: ${e?.message ?? e}`));
      }).finally(() => {
        this._running--;
        const next = this._queued.shift();
        if (next) next();
      });
    };
    if (this._running < this._gateWorkers) go();
    else this._queued.push(go);
  }

  /** @param {GateCall} call */
  async _runGate(call) {
    const key = JSON.stringify(call.requestId);
    this._calls.set(key, call);
    /** @type {any} */
    let result;
    /** @type {GatebridgeError | undefined} */
    let error;
    try {
      const fn = this._gates.get(call.gate);
      if (!fn) throw new Error(`no handler for gate ${JSON.stringify(call.gate)} in this runtime`);
      const [code, out, err] = gateResult(await fn(call));
      result = { exitCode: code };
      if (out.length) result.stdout = out.toString("base64");
      if (err.length) result.stderr = err.toString("base64");
    } catch (e) {
      const ex = /** @type {any} */ (e);
      const name = ex?.name ?? "Error";
      const text = ex instanceof GatebridgeError ? ex.message : ex?.message ? `${name}: ${ex.message}` : String(ex);
      error = new GatebridgeError(GATE_FAILED, text, { exception: name });
    } finally {
      call._answered = true;
      this._calls.delete(key);
    }
    if (call.cancelled) {
      result = undefined;
      error = new RequestCancelledError("request cancelled");
    }
    this._respond(call.requestId, result, error);
  }

  /** @param {ApprovalRequest} req */
  async _runApproval(req) {
    const key = JSON.stringify(req.requestId);
    this._calls.set(key, req);
    try {
      /** @type {any} */
      let decision = this.onApproval
        ? await this.onApproval(req)
        : ["deny", "no approval callback in this runtime (Client.start({onApproval}))"];
      let reason = "";
      /** @type {any} */
      let grant;
      let connectionOnly = false;
      if (Array.isArray(decision)) [decision, reason = ""] = decision;
      else if (decision && typeof decision === "object" && !("decision" in decision) && "scope" in decision) {
        grant = decision; // a grant: allow, and keep it
        decision = "allow";
      } else if (decision && typeof decision === "object") ({ decision, reason = "", grant, connectionOnly = false } = decision);
      if (typeof decision === "boolean") decision = decision ? "allow" : "deny";
      if (!DECISIONS.includes(decision)) {
        throw new TypeError(`approval callback returned ${JSON.stringify(decision)}: want one of ${DECISIONS.join(", ")}`);
      }
      /** @type {any} */
      const result = { decision };
      if (reason) result.reason = String(reason);
      if (grant && decision === "allow") {
        const { description, ...wire } = grant; // description is the server's
        result.grant = wire;
        if (connectionOnly) result.connectionOnly = true;
      }
      this._respond(req.requestId, result);
    } catch (e) {
      const ex = /** @type {any} */ (e);
      this._respond(req.requestId, undefined, new GatebridgeError(GATE_FAILED, `${ex?.name ?? "Error"}: ${ex?.message ?? ex}`));
    } finally {
      this._calls.delete(key);
    }
  }

  // -- gates

  /** Registers a gate answered by fn (async or not): the command `name`
   * appears in every sandbox of this connection.
   * @param {string} name @param {(call: GateCall) => unknown} fn @param {any} [opts] */
  async registerGate(name, fn, opts = {}) {
    if (typeof fn !== "function") throw new TypeError("registerGate needs a function");
    /** @type {any} */
    const p = { name, summary: opts.summary ?? "", usage: opts.usage ?? "" };
    if (opts.params != null) p.params = opts.params;
    if (opts.inputSchema != null) p.inputSchema = opts.inputSchema;
    if (opts.stdin != null) p.stdin = opts.stdin;
    const t = ms(opts.timeout, "timeout");
    if (t) p.timeoutMs = t;
    if (opts.approval) p.approval = true;
    if (this._gates.has(name)) throw new ConflictError(`gate ${JSON.stringify(name)} is already registered on this client`);
    this._gates.set(name, fn);
    try {
      await this.request("gate/register", p);
    } catch (e) {
      this._gates.delete(name);
      throw e;
    }
  }

  /** @param {string} name */
  async unregisterGate(name) {
    await this.request("gate/unregister", { name });
    this._gates.delete(name);
  }

  /** Every gate a sandbox offers (gate/list): tool descriptions for a model. */
  async listGates() {
    const r = await this.request("gate/list");
    return Array.isArray(r) ? r : [];
  }

  // -- sandboxes and processes

  /** Opens a sandbox (sandbox/open).
   * @param {any} [opts] */
  async openSandbox(opts = {}) {
    const sandboxId = opts.sandboxId ?? `sb${++this._sandboxSeq}`;
    const workspace = opts.workspace ?? process.cwd();
    /** @type {any} */
    const p = { sandboxId, backend: opts.backend ?? "auto", workspace };
    if (opts.writableWorkspace) p.writableWorkspace = true;
    if (opts.image) p.image = opts.image;
    if (opts.runtime) p.runtime = opts.runtime;
    const env = checkEnv(opts.env);
    if (env) p.env = env;
    const res = (await this.request("sandbox/open", p)) ?? {};
    const sb = new Sandbox(this, String(res.sandboxId ?? sandboxId), String(res.backend ?? p.backend), workspace,
      String(res.workspaceInside ?? workspace), String(res.reason ?? ""));
    this._sandboxes.set(sb.id, sb);
    return sb;
  }

  /** process/list: [{processId, sandboxId, argv, running, exitCode}]. */
  async listProcesses() {
    const r = await this.request("process/list");
    return Array.isArray(r?.processes) ? r.processes : [];
  }

  // -- closing

  /** Closes the connection: the server stops and removes every process and
   * sandbox of it. Over stdio it waits up to `timeout` seconds for the
   * server to exit (then terminates it); over TCP it closes the sending
   * side and waits for the server to close its side.
   * @param {{timeout?: number}} [opts] */
  async close(opts = {}) {
    const timeout = opts.timeout ?? 30;
    if (!this._closing) {
      this._closing = true;
      for (const c of this._calls.values()) c._cancel();
      this._writerEnded = true;
      try { this._writer?.end(); } catch { /* already gone */ }
    }
    const child = this._child;
    if (child) {
      const exited = () => child.exitCode != null || child.signalCode != null;
      const exit = new Promise((r) => { if (exited()) r(undefined); else child.once("exit", r); });
      if (!(await within(exit, timeout))) {
        console.warn(`gatebridge-client: the server did not exit within ${timeout}s of close(); terminating it`);
        child.kill("SIGTERM");
        if (!(await within(exit, 10))) {
          child.kill("SIGKILL");
          await exit;
        }
      }
      child.stdout?.destroy();
    }
    if (!(await within(this._lost, this._child ? 5 : timeout))) this._abortTransport();
    if (this._socket) this._socket.destroy();
    await within(this._lost, 5);
    if (!this._closedError) this._connectionLost(new ConnectionClosedError("the client was closed"));
  }
}

/** @param {GatebridgeError} e */
function fresh(e) {
  return e instanceof ConnectionClosedError ? new ConnectionClosedError(e.message) : e;
}

/**
 * Whether p settles within s seconds.
 * @param {Promise<unknown>} p
 * @param {number} s
 */
async function within(p, s) {
  /** @type {NodeJS.Timeout | undefined} */
  let t;
  const r = await Promise.race([p.then(() => true), new Promise((res) => { t = setTimeout(() => res(false), s * 1000); })]);
  clearTimeout(t);
  return r;
}

// ---------------------------------------------------------------- sandbox

/** An open sandbox. Commands run with the workspace as their working directory. */
export class Sandbox {
  /**
   * @param {Client} client @param {string} id @param {string} backend @param {string} workspace
   * @param {string} workspaceInside @param {string} reason
   */
  constructor(client, id, backend, workspace, workspaceInside, reason) {
    this.client = client;
    this.id = id;
    this.backend = backend;
    this.workspace = workspace;
    this.workspaceInside = workspaceInside;
    this.reason = reason;
    this._closed = false;
  }

  /** Runs a command to its end: a string runs under sh -c, an array is an argv.
   * @param {string | readonly string[]} command @param {any} [opts] */
  async run(command, opts = {}) {
    const p = await this.start(command, { ...opts, stdin: opts.stdin ?? false });
    try {
      return await p.wait();
    } catch (e) {
      if (p.running && !this.client.closed) await p.kill().catch(() => false);
      throw e;
    }
  }

  /** Starts a command in the background. stdin: true (default) gives a
   * pipe (Process.write, closeStdin); false /dev/null; a string or bytes
   * are written, then stdin is closed. tty: {rows, cols} runs it on a
   * pseudo-terminal (one stream, stdout; Process.resize); arg0: the
   * argv[0] it sees. A backend that cannot rejects with InvalidParamsError
   * naming it.
   * @param {string | readonly string[]} command @param {any} [opts] */
  async start(command, opts = {}) {
    const c = this.client;
    const argv = argvOf(command);
    const stdinOpt = opts.stdin ?? true;
    const data = typeof stdinOpt === "boolean" ? null : toBuffer(stdinOpt);
    const hasStdin = data != null || stdinOpt === true;
    const id = opts.processId ?? `p${++c._processSeq}`;
    if (c._processes.has(id)) throw new ConflictError(`process id ${JSON.stringify(id)} is in use`);
    const proc = new Process(c, this, id, argv, opts.onOutput, opts.keepOutput ?? true, hasStdin, opts.onGateCall);
    /** @type {any} */
    const p = { processId: id, sandboxId: this.id, argv };
    if (opts.onGateCall) p.reportGateCalls = true;
    if (opts.cwd) p.cwd = opts.cwd;
    const env = checkEnv(opts.env);
    if (env) p.env = env;
    if (hasStdin) p.stdin = true;
    const t = ms(opts.timeout, "timeout");
    if (t) p.timeoutMs = t;
    if (opts.tty != null) {
      p.tty = { rows: Number(opts.tty.rows), cols: Number(opts.tty.cols) };
      proc._tty = true;
    }
    if (opts.arg0 != null) p.arg0 = String(opts.arg0);
    c._processes.set(id, proc); // before the request: output may come before its response
    try {
      await c.request("process/start", p);
    } catch (e) {
      if (c._processes.get(id) === proc) c._processes.delete(id);
      throw e;
    }
    if (data != null) {
      try {
        await proc.write(data);
        await proc.closeStdin();
      } catch (e) {
        // The command exited without reading all of it (like a broken pipe).
        if (!(e instanceof InvalidParamsError && /stdin is closed/.test(e.message))) throw e;
      }
    }
    return proc;
  }

  /** The files of the workspace. */
  get fs() {
    return new SandboxFS(this);
  }

  /** The whole file path of the workspace.
   * @param {string | Uint8Array} path */
  readFile(path) {
    return this.fs.read(path);
  }

  /** Replaces the file path of the workspace atomically.
   * @param {string | Uint8Array} path @param {Data} data */
  writeFile(path, data) {
    return this.fs.write(path, data);
  }

  /** Stops the sandbox's processes and removes it (sandbox/close). */
  async close() {
    if (this._closed) return;
    this._closed = true;
    try {
      if (!this.client.closed) await this.client.request("sandbox/close", { sandboxId: this.id });
    } finally {
      this.client._sandboxes.delete(this.id);
    }
  }
}

// ---------------------------------------------------------------- files

/** `{field: path}`, with `fieldBase64` when path is bytes that are not UTF-8.
 * @param {string} field @param {string | Uint8Array} path */
function pathParams(field, path) {
  if (typeof path === "string") return { [field]: path };
  const b = toBuffer(path);
  const s = b.toString("utf8");
  if (Buffer.from(s, "utf8").equals(b)) return { [field]: s };
  return { [field]: s, [`${field}Base64`]: b.toString("base64") };
}

/** @param {any} e */
function fileInfo(e) {
  const nameBytes = exactBytes(e.fileName, e.fileNameBase64);
  return {
    name: nameBytes.toString("utf8"), nameBytes, type: e.type ?? "other", size: e.size ?? 0, mode: e.mode ?? 0,
    mtime: (e.modifiedAtMs ?? 0) / 1000, isFile: e.type === "file", isDirectory: e.type === "directory",
    isSymlink: e.type === "symlink",
  };
}

/** The files of a sandbox's workspace (sandbox.fs), through fs/*: paths
 * relative to the workspace or absolute as its commands see it; no link
 * is followed, nothing outside it or under a protected path is reached. A
 * path that is not UTF-8 is given as bytes. */
export class SandboxFS {
  /** @param {Sandbox} sandbox */
  constructor(sandbox) {
    this.sandbox = sandbox;
  }

  /** @param {string} method @param {string | Uint8Array} path @param {any} [params] */
  _call(method, path, params = {}) {
    return this.sandbox.client.request(method, { sandboxId: this.sandbox.id, ...pathParams("path", path), ...params });
  }

  get _chunk() {
    return Number(this.sandbox.client.limits?.maxFsChunkBytes) || 1 << 20;
  }

  /** fs/read: up to length bytes (0: one chunk) from offset.
   * @param {string | Uint8Array} path */
  async readChunk(path, offset = 0, length = 0) {
    const r = await this._call("fs/read", path, { offset, length });
    return { data: unb64(r.data), size: r.size ?? 0, eof: !!r.eof };
  }

  /** The whole file, chunk by chunk.
   * @param {string | Uint8Array} path */
  async read(path) {
    const parts = [];
    for (let off = 0; ;) {
      const { data, eof } = await this.readChunk(path, off);
      parts.push(data);
      off += data.length;
      if (eof || data.length === 0) return Buffer.concat(parts);
    }
  }

  /** Replaces the file atomically (fs/write); over one chunk through a
   * temporary file beside it, renamed over it at the end.
   * @param {string | Uint8Array} path @param {Data} data */
  async write(path, data) {
    const b = toBuffer(data);
    const n = this._chunk;
    if (b.length <= n) {
      await this._call("fs/write", path, { data: b.toString("base64") });
      return;
    }
    const raw = typeof path === "string" ? Buffer.from(path, "utf8") : toBuffer(path);
    const slash = raw.lastIndexOf(0x2f);
    const rand = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;
    const tmp = Buffer.concat([raw.subarray(0, slash + 1), Buffer.from("."), raw.subarray(slash + 1), Buffer.from(`.gb-upload-${rand}`)]);
    try {
      await this._call("fs/write", tmp, { data: b.subarray(0, n).toString("base64") });
      for (let i = n; i < b.length; i += n) {
        await this._call("fs/write", tmp, { data: b.subarray(i, i + n).toString("base64"), append: true });
      }
      await this._call("fs/rename", tmp, { ...pathParams("newPath", raw), overwrite: true });
    } catch (e) {
      await this._call("fs/remove", tmp, { force: true }).catch(() => {});
      throw e;
    }
  }

  /** Adds data at the end (the file is made if missing).
   * @param {string | Uint8Array} path @param {Data} data */
  async append(path, data) {
    const b = toBuffer(data);
    const n = this._chunk;
    for (let i = 0; i < Math.max(b.length, 1); i += n) {
      await this._call("fs/write", path, { data: b.subarray(i, i + n).toString("base64"), append: true });
    }
  }

  /** Writes data (one chunk at most) in place at offset.
   * @param {string | Uint8Array} path @param {number} offset @param {Data} data */
  async writeAt(path, offset, data) {
    await this._call("fs/write", path, { data: b64(data), offset });
  }

  /** The directory's entries, sorted by name.
   * @param {string | Uint8Array} [path] */
  async list(path = ".") {
    const r = await this._call("fs/list", path);
    return (r.entries ?? []).map(fileInfo);
  }

  /** The entry itself (a link is not followed).
   * @param {string | Uint8Array} path */
  async stat(path) {
    return fileInfo(await this._call("fs/stat", path));
  }

  /** @param {string | Uint8Array} path */
  async exists(path) {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** @param {string | Uint8Array} path @param {{recursive?: boolean, force?: boolean}} [opts] */
  async remove(path, opts = {}) {
    await this._call("fs/remove", path, { recursive: !!opts.recursive, force: !!opts.force });
  }

  /** @param {string | Uint8Array} path @param {{recursive?: boolean}} [opts] */
  async mkdir(path, opts = {}) {
    await this._call("fs/mkdir", path, { recursive: !!opts.recursive });
  }

  /** @param {string | Uint8Array} path @param {string | Uint8Array} newPath @param {{overwrite?: boolean}} [opts] */
  async rename(path, newPath, opts = {}) {
    await this._call("fs/rename", path, { ...pathParams("newPath", newPath), overwrite: !!opts.overwrite });
  }
}

// ---------------------------------------------------------------- process

/** A command started with Sandbox.start. Its output: the onOutput
 * callback, `for await (const chunk of process)`, or stdout/stderr. */
export class Process {
  /**
   * @param {Client} client @param {Sandbox} sandbox @param {string} id @param {string[]} argv
   * @param {((stream: string, data: Buffer) => unknown) | undefined} onOutput
   * @param {boolean} keepOutput @param {boolean} hasStdin
   * @param {((report: GateCallReport) => unknown) | undefined} [onGateCall]
   */
  constructor(client, sandbox, id, argv, onOutput, keepOutput, hasStdin, onGateCall) {
    this.client = client;
    this.sandbox = sandbox;
    this.id = id;
    this.argv = argv;
    this.onOutput = onOutput;
    this.onGateCall = onGateCall;
    /** @type {GateCallReport[]} */
    this._reported = [];
    this._keep = keepOutput;
    this._hasStdin = hasStdin;
    this._tty = false; // started with tty: resize applies
    /** @type {{seq: number, stream: string, data: Buffer}[]} */
    this._chunks = [];
    this._lastSeq = 0;
    /** @type {any} */
    this._exit = null;
    /** @type {GatebridgeError | null} */
    this._lostError = null;
    /** @type {Set<() => void>} */
    this._wakers = new Set();
    /** @type {Set<(c: {seq: number, stream: string, data: Buffer}) => void>} */
    this._feeds = new Set();
    /** @type {(v?: unknown) => void} */
    let done = () => {};
    this._done = new Promise((r) => { done = r; });
    this._resolveDone = done;
  }

  get running() { return this._exit == null && this._lostError == null; }
  /** The exit code, or null while it runs. */
  get exitCode() { return this._exit == null ? null : Number(this._exit.exitCode ?? 0); }
  /** @param {string} stream */
  _joined(stream) { return Buffer.concat(this._chunks.filter((c) => c.stream === stream).map((c) => c.data)); }
  /** The stdout received so far. */
  get stdout() { return this._joined("stdout"); }
  get stderr() { return this._joined("stderr"); }
  /** The gate calls the command made: once it has exited, those
   * process/exited lists; before, those reported so far (onGateCall). */
  get gateCalls() { return this._exit == null ? [...this._reported] : gateCallsOf(this._exit)[0]; }

  /** Writes to the process's stdin; waits while the server's queue for it is full.
   * @param {Data} data */
  async write(data) {
    const b = toBuffer(data);
    if (!this._hasStdin) throw new InvalidParamsError(`process ${JSON.stringify(this.id)} was started without stdin (start(..., {stdin: true}))`);
    for (let i = 0; i < b.length; i += WRITE_CHUNK) {
      const chunk = b.subarray(i, i + WRITE_CHUNK).toString("base64");
      let delay = 0.002;
      for (;;) {
        try {
          await this.client.request("process/write", { processId: this.id, chunk });
          break;
        } catch (e) {
          if (!(e instanceof LimitError) || !this.running) throw e;
          await sleep(delay); // the process has not read what is queued yet
          delay = Math.min(delay * 2, 0.1);
        }
      }
    }
  }

  /** Closes the process's stdin (it reads end of file after what was written). */
  async closeStdin() {
    if (this._hasStdin) await this.client.request("process/closeStdin", { processId: this.id });
  }

  /** Sends "INT", "TERM", "KILL", "HUP" (or 2, 15, 9, 1) to the process's
   * group; false if it had already exited.
   * @param {string | number} [sig] */
  async signal(sig = "TERM") {
    const name = signalName(sig);
    if (!this.running) return false;
    try {
      await this.client.request("process/signal", { processId: this.id, signal: name });
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
    return true;
  }
  /** process/resize: the new size of the terminal of a process started
   * with tty (it gets SIGWINCH); false if it had already exited.
   * @param {number} rows @param {number} cols */
  async resize(rows, cols) {
    if (!this._tty) throw new InvalidParamsError(`process ${JSON.stringify(this.id)} was started without tty (start(..., {tty: {rows, cols}}))`);
    if (!this.running) return false;
    try {
      await this.client.request("process/resize", { processId: this.id, rows: Number(rows), cols: Number(cols) });
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
    return true;
  }
  terminate() { return this.signal("TERM"); }
  kill() { return this.signal("KILL"); }

  /** Waits for the exit (every onOutput callback has run by then) and
   * resolves to its RunResult; rejects with TimeoutError after `timeout`
   * seconds, ConnectionClosedError if the server went away.
   * @param {{timeout?: number}} [opts] */
  async wait(opts = {}) {
    if (opts.timeout != null && !(await within(this._done, opts.timeout))) {
      throw new TimeoutError(`process ${this.id} still runs after ${opts.timeout}s`);
    }
    await this._done;
    if (this._lostError) throw fresh(this._lostError);
    const e = this._exit ?? {};
    const answer = e.answer == null && e.answerBase64 == null ? null : exactBytes(e.answer, e.answerBase64);
    const [calls, dropped] = gateCallsOf(e);
    return new RunResult(Number(e.exitCode ?? 0), this.stdout, this.stderr, e.signal || null, !!e.timedOut, answer, calls, dropped);
  }

  /** The output chunks as they come: {seq, stream, data}; ends at the exit
   * (with keepOutput, the chunks so far come first). */
  async *output() {
    let i = 0;
    /** @type {{seq: number, stream: string, data: Buffer}[]} */
    const own = [];
    const mine = this._keep ? this._chunks : own;
    /** @type {() => void} */
    let wake = () => {};
    const waker = () => wake();
    /** @param {{seq: number, stream: string, data: Buffer}} c */
    const feed = (c) => { own.push(c); };
    if (!this._keep) this._feeds.add(feed);
    this._wakers.add(waker);
    try {
      for (;;) {
        while (i < mine.length) yield mine[i++];
        if (this._lostError) throw fresh(this._lostError);
        if (this._exit) return;
        await new Promise((r) => { wake = () => r(undefined); });
      }
    } finally {
      this._wakers.delete(waker);
      this._feeds.delete(feed);
    }
  }
  [Symbol.asyncIterator]() { return this.output(); }

  /** process/read: the retained chunks after afterSeq (waiting up to `wait` seconds for one).
   * @param {{afterSeq?: number, maxBytes?: number, wait?: number}} [opts] */
  async read(opts = {}) {
    /** @type {any} */
    const p = { processId: this.id, afterSeq: opts.afterSeq ?? 0 };
    if (opts.maxBytes) p.maxBytes = opts.maxBytes;
    const w = ms(opts.wait, "wait");
    if (w) p.waitMs = w;
    const r = (await this.client.request("process/read", p)) ?? {};
    return {
      chunks: (Array.isArray(r.chunks) ? r.chunks : []).map((/** @type {any} */ c) => ({ seq: Number(c.seq), stream: String(c.stream), data: unb64(c.chunk) })),
      exited: !!r.exited,
      exitCode: r.exitCode ?? null,
      firstSeq: Number(r.firstSeq ?? 0),
      nextSeq: Number(r.nextSeq ?? 0),
    };
  }

  /** process/snapshot: the retained head and tail of stdout and stderr. */
  async snapshot() {
    const r = (await this.client.request("process/snapshot", { processId: this.id })) ?? {};
    return {
      stdout: unb64(r.stdout), stderr: unb64(r.stderr), truncated: !!r.truncated,
      omittedBytes: Number(r.omittedBytes ?? 0), exitCode: r.exitCode ?? null, running: !!r.running,
    };
  }

  /** process/wait on the server: {exitCode, signal, timedOut, running}, waiting up to `timeout` seconds.
   * @param {{timeout?: number}} [opts] */
  async status(opts = {}) {
    /** @type {any} */
    const p = { processId: this.id };
    const t = ms(opts.timeout, "timeout");
    if (t) p.timeoutMs = t;
    return (await this.client.request("process/wait", p)) ?? {};
  }

  /** @param {number} seq @param {string} stream @param {Buffer} data */
  _onOutput(seq, stream, data) {
    if (seq <= this._lastSeq) return; // a repeat
    this._lastSeq = seq;
    const chunk = { seq, stream, data };
    if (this._keep) this._chunks.push(chunk);
    for (const f of this._feeds) f(chunk);
    for (const w of this._wakers) w();
    if (this.onOutput) {
      try {
        const r = this.onOutput(stream, data);
        if (r && typeof (/** @type {any} */ (r).catch) === "function") {
          /** @type {Promise<unknown>} */ (r).catch((e) => console.warn(`gatebridge-client: onOutput of process ${this.id}:`, e));
        }
      } catch (e) {
        console.warn(`gatebridge-client: onOutput of process ${this.id}:`, e);
      }
    }
  }

  /** @param {GateCallReport} report */
  _onGateCall(report) {
    this._reported.push(report);
    if (!this.onGateCall) return;
    try {
      const r = this.onGateCall(report);
      if (r && typeof (/** @type {any} */ (r).catch) === "function") {
        /** @type {Promise<unknown>} */ (r).catch((e) => console.warn(`gatebridge-client: onGateCall of process ${this.id}:`, e));
      }
    } catch (e) {
      console.warn(`gatebridge-client: onGateCall of process ${this.id}:`, e);
    }
  }

  /** @param {any} params */
  _onExit(params) {
    this._exit = { ...params };
    this._resolveDone();
    for (const w of this._wakers) w();
  }

  /** @param {GatebridgeError} err */
  _onLost(err) {
    if (this._exit) return;
    this._lostError = err;
    this._resolveDone();
    for (const w of this._wakers) w();
  }
}
