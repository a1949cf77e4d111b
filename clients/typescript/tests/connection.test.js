// The connection's life: TCP with a token, TLS, a server that dies, bad
// binaries, and streams of your own. Local backend only (over --listen the
// server allows it with GATEBRIDGE_SANDBOX_ALLOW_UNSANDBOXED).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import {
  Client, ConnectionClosedError, GatebridgeError, InvalidParamsError, UNAUTHORIZED, UnauthorizedError,
} from "../index.js";
import {
  BIN, ListenServer, ROOT, Recorder, WAIT, haveOpenssl, makeCert, makeToken, newClient, pidsWith, rmrf, serverEnv, uniq,
  withTimeout, workspace,
} from "./helpers.js";

describe("stdio", () => {
  test("initialize: version, backends, limits", async () => {
    const c = await newClient();
    try {
      assert.equal(c.protocolVersion, 1);
      assert.ok(c.backends.some((b) => b.name === "local"));
      assert.ok(c.limits.maxMessageBytes > 0);
      assert.ok(c.pid > 0);
    } finally {
      await c.close();
    }
  });

  test("a missing binary says how to point at one", async () => {
    await assert.rejects(Client.start({ argv: ["/nonexistent/gatebridge", "serve", "--stdio"] }), /GATEBRIDGE_BIN/);
  });

  test("the server dies: pending calls and waits reject instead of hanging", async () => {
    const c = await newClient();
    const ws = workspace();
    try {
      const sb = await c.openSandbox({ backend: "local", workspace: ws });
      const p = await sb.start(["sh", "-c", "read x"]); // ends when the server's pipe closes
      const pending = c.request("process/wait", { processId: p.id });
      process.kill(c.pid, "SIGKILL");
      await assert.rejects(withTimeout(pending, "the pending request"), (e) =>
        e instanceof ConnectionClosedError && /killed|exited/.test(e.message));
      await assert.rejects(p.wait({ timeout: WAIT }), ConnectionClosedError);
      await assert.rejects(sb.run("true"), ConnectionClosedError);
      assert.ok(c.closed);
    } finally {
      await c.close();
      rmrf(ws);
    }
  });

  test("connect over streams you already have", async () => {
    const server = spawn(BIN, ["serve", "--stdio"], { stdio: ["pipe", "pipe", "ignore"], env: serverEnv() });
    const exited = new Promise((r) => server.once("exit", r));
    const c = await Client.connect(server.stdout, server.stdin);
    const ws = workspace();
    try {
      await c.registerGate("viaconnect", (call) => `ok ${call.args[0]}\n`);
      const sb = await c.openSandbox({ backend: "local", workspace: ws });
      assert.equal((await sb.run("viaconnect 1")).stdoutText, "ok 1\n");
      await c.close(); // ends the server's stdin: it exits
      assert.equal(await withTimeout(exited, "the server's exit"), 0);
    } finally {
      rmrf(ws);
    }
  });
});

describe("serve --listen", () => {
  let dir, token, tokenFile, server;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "gb-jsclient-listen-"));
    ({ token, path: tokenFile } = makeToken(dir));
    server = await ListenServer.start(tokenFile);
  });
  after(async () => {
    await server?.stop();
    rmrf(dir);
  });

  test("TCP with the token: a gate, a command, and close() removes what it started", async () => {
    const ws = workspace();
    try {
      const marker = uniq("gbjs-tcp");
      const c = await Client.connectTcp("127.0.0.1", server.port, { token });
      assert.equal(c.pid, undefined);
      assert.equal(c.protocolVersion, 1);
      await c.registerGate("tcp_gate", (call) => `gate got ${call.args.join(" ")}\n`);
      const sb = await c.openSandbox({ backend: "local", workspace: ws });
      const r = await sb.run("echo over tcp; tcp_gate a b");
      assert.deepEqual([r.exitCode, r.stdoutText, r.stderrText], [0, "over tcp\ngate got a b\n", ""]);
      const rec = new Recorder();
      await sb.start(["sh", "-c", "echo up; sleep 30; :", marker], { stdin: false, onOutput: rec.cb });
      await rec.waitFor("up\n");
      assert.ok(pidsWith(marker).length > 0);
      await c.close(); // resolves once the server has removed the sandbox and closed its side
      assert.deepEqual(pidsWith(marker), [], "a sandboxed process outlived close()");
      await server.waitLog(": disconnected");
      await assert.rejects(c.listGates(), ConnectionClosedError);
      assert.ok(!server.log.includes(token), "the token is in the server's log");
    } finally {
      rmrf(ws);
    }
  });

  test("a wrong token is refused: UnauthorizedError with the server's hint", async () => {
    await assert.rejects(Client.connectTcp("127.0.0.1", server.port, { token: "not-" + token }), (e) => {
      assert.ok(e instanceof UnauthorizedError);
      assert.ok(e instanceof GatebridgeError);
      assert.equal(e.code, UNAUTHORIZED);
      assert.match(e.message, /wrong authToken/);
      assert.match(e.hint, /token/);
      assert.match(String(e), /hint: /);
      return true;
    });
    assert.ok(!server.log.includes(token));
    await assert.rejects(Client.connectTcp("127.0.0.1", server.port, { token: "" }), TypeError);
  });

  test("TLS: the certificate is checked", { skip: haveOpenssl() ? false : "no openssl to make a certificate" }, async () => {
    const { cert, key } = makeCert(dir);
    const tlsServer = await ListenServer.start(tokenFile, "--tls-cert", cert, "--tls-key", key);
    const ws = workspace();
    try {
      const c = await Client.connectTcp("127.0.0.1", tlsServer.port, { token, cafile: cert });
      const r = await (await c.openSandbox({ backend: "local", workspace: ws })).run("echo over tls");
      assert.equal(r.stdoutText, "over tls\n");
      await c.close();
      await tlsServer.waitLog(": disconnected");
      const c2 = await Client.connectTcp("127.0.0.1", tlsServer.port, { token, ca: readFileSync(cert, "utf8") });
      await c2.close();
      // The system's CAs do not trust it.
      await assert.rejects(Client.connectTcp("127.0.0.1", tlsServer.port, { token, tls: true }), (e) =>
        !(e instanceof GatebridgeError) && /self[- ]signed|certificate/i.test(e.message));
    } finally {
      await tlsServer.stop();
      rmrf(ws);
    }
  });
});

describe("arguments checked before anything is sent", () => {
  test("bad commands, env, signals and timeouts", async () => {
    const c = await newClient();
    try {
      const sb = await c.openSandbox({ backend: "local", workspace: ROOT });
      await assert.rejects(sb.run([]), TypeError);
      await assert.rejects(sb.run("true", { env: { A: 1 } }), TypeError);
      await assert.rejects(sb.run("true", { timeout: -1 }), TypeError);
      await assert.rejects(c.registerGate("x", "not a function"), TypeError);
      await assert.rejects(c.openSandbox({ backend: "local", workspace: "relative" }), InvalidParamsError);
    } finally {
      await c.close();
    }
  });
});
