// Shared by the tests (not a test file itself: node --test runs *.test.js).
//
// GATEBRIDGE_BIN is the binary (default: bin/gatebridge at the top of the
// repository). Every backend test runs on local; on bwrap too with
// GATEBRIDGE_TEST_BWRAP=1, on docker too with GATEBRIDGE_TEST_DOCKER=1
// (image GATEBRIDGE_TEST_IMAGE, default gatebridge-test:latest: `make
// test-image`). A backend named in GATEBRIDGE_REQUIRE_BACKENDS (a comma
// list, as in CI) is tested too, and then a backend that cannot run fails
// instead of skipping. As the Python suite does.

import { spawn, spawnSync } from "node:child_process";
import { accessSync, chmodSync, chownSync, constants, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";

import { Client } from "../index.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
let bin = process.env.GATEBRIDGE_BIN || "bin/gatebridge";
if (!isAbsolute(bin) && bin.includes("/")) bin = join(ROOT, bin);
export const BIN = bin;
export const REQUIRED = (process.env.GATEBRIDGE_REQUIRE_BACKENDS || "").split(",").map((s) => s.trim()).filter(Boolean);
export const IMAGE = process.env.GATEBRIDGE_TEST_IMAGE || "gatebridge-test:latest";
/** Bounds on waits for things that happen at once when all is well. */
export const WAIT = 20;

try {
  accessSync(BIN, constants.X_OK);
} catch {
  throw new Error(`no gatebridge binary at ${BIN}: run \`make build\`, or set GATEBRIDGE_BIN`);
}

/** The servers' XDG_CONFIG_HOME (their grants file is under it). */
export const configHome = mkdtempSync(join(tmpdir(), "gb-jsclient-cfg-"));
process.on("exit", () => rmSync(configHome, { recursive: true, force: true }));

/** The server's environment: no user config file (hermetic tests). */
export function serverEnv(extra = {}) {
  return { ...process.env, GATEBRIDGE_CONFIG: "", XDG_CONFIG_HOME: configHome, ...extra };
}

/** @param {object} [opts] */
export function newClient(opts = {}) {
  return Client.start({ argv: [BIN, "serve", "--stdio"], env: serverEnv(), stderr: "ignore", ...opts });
}

/** A fresh workspace the sandboxed commands can write (owned by nobody
 * when we are root, as gatebridge then runs commands as the owner). */
export function workspace() {
  const ws = mkdtempSync(join(tmpdir(), "gb-jsclient-ws-"));
  chmodSync(ws, 0o755);
  if (process.geteuid?.() === 0) chownSync(ws, 65534, 65534);
  return ws;
}

export function rmrf(p) {
  rmSync(p, { recursive: true, force: true });
}

/** null when the backend is to be tested, else why not. */
export function backendWanted(name) {
  if (name === "local" || REQUIRED.includes(name)) return null;
  const v = "GATEBRIDGE_TEST_" + name.toUpperCase();
  if (process.env[v] === "1") return null;
  return `${name} tests are off: set ${v}=1 (or name it in GATEBRIDGE_REQUIRE_BACKENDS)`;
}

export function openExtra(backend) {
  return backend === "docker" ? { image: IMAGE } : {};
}

/** Host pids whose command line holds marker. */
export function pidsWith(marker) {
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`).includes(marker)) out.push(Number(d));
    } catch { /* gone */ }
  }
  return out;
}

/** Whether pid runs (not a zombie). */
export function pidAlive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

export const uniq = (base) => `${base}_${randomBytes(4).toString("hex")}`;

/** Records onOutput chunks; waitFor resolves once needle has come on stream. */
export class Recorder {
  constructor() {
    this.chunks = [];
    this.waiters = [];
    this.cb = (stream, data) => {
      this.chunks.push([stream, Buffer.from(data)]);
      this.waiters = this.waiters.filter((w) => !w());
    };
  }
  text(stream = "stdout") {
    return Buffer.concat(this.chunks.filter(([s]) => s === stream).map(([, d]) => d)).toString("latin1");
  }
  waitFor(needle, stream = "stdout") {
    return withTimeout(new Promise((res) => {
      const check = () => (this.text(stream).includes(needle) ? (res(true), true) : false);
      if (!check()) this.waiters.push(check);
    }), `${JSON.stringify(needle)} on ${stream}`);
  }
}

/** p, or a rejection after WAIT seconds (a failure, not a slow machine). */
export function withTimeout(p, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), WAIT * 1000); })])
    .finally(() => clearTimeout(t));
}

/** A deferred: a promise and its resolve. */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

/** A fresh token and its file (0600) in dir. */
export function makeToken(dir) {
  const token = randomBytes(24).toString("hex");
  const path = join(dir, "token");
  writeFileSync(path, token + "\n", { mode: 0o600, flag: "wx" });
  return { token, path };
}

export function haveOpenssl() {
  return spawnSync("openssl", ["version"]).status === 0;
}

/** A self-signed certificate for 127.0.0.1 and its key, in dir. */
export function makeCert(dir) {
  const cert = join(dir, "cert.pem"), key = join(dir, "key.pem");
  const r = spawnSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=gatebridge test", "-addext", "subjectAltName=IP:127.0.0.1"]);
  if (r.status !== 0) throw new Error("openssl: " + r.stderr);
  return { cert, key };
}

/** `gatebridge serve --listen 127.0.0.1:0 --token-file F` and its log. */
export class ListenServer {
  static async start(tokenFile, ...args) {
    const s = new ListenServer();
    // The local backend is refused over --listen unless the config allows unsandboxed runs.
    s.proc = spawn(BIN, ["serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, ...args], {
      stdio: ["ignore", "ignore", "pipe"], env: serverEnv({ GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED: "true" }),
    });
    s.log = "";
    s.waiters = [];
    s.exited = new Promise((r) => s.proc.once("exit", (code) => r(code)));
    s.proc.stderr.on("data", (d) => {
      s.log += d.toString();
      s.waiters = s.waiters.filter((w) => !w());
    });
    const line = await withTimeout(Promise.race([
      new Promise((res) => { const w = () => { const m = /listening on (\S+)/.exec(s.log); if (m) res(m[1]); return !!m; }; if (!w()) s.waiters.push(w); }),
      s.exited.then(() => { throw new Error("the server does not listen: " + s.log); }),
    ]), "serve --listen");
    s.port = Number(line.slice(line.lastIndexOf(":") + 1));
    return s;
  }
  waitLog(needle) {
    return withTimeout(new Promise((res) => { const w = () => (this.log.includes(needle) ? (res(true), true) : false); if (!w()) this.waiters.push(w); }), needle);
  }
  async stop() {
    if (this.proc.exitCode == null) this.proc.kill("SIGTERM");
    return this.exited;
  }
}
