// A hostile (or broken) server: the client bounds what it can be made to
// hold. Each test performs the attack against a fake server on loopback.

import { test } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";

import { Client, ConnectionClosedError, LIMIT, LineSplitter, METHOD_NOT_FOUND } from "../index.js";
import { deferred, withTimeout } from "./helpers.js";

/** A fake server: onMessage(msg, send, sock) for every line it reads; it
 * answers initialize itself. */
async function fakeServer(onMessage) {
  const conns = [];
  const srv = net.createServer((sock) => {
    conns.push(sock);
    sock.on("error", () => {});
    let buf = "";
    const send = (m) => sock.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
    sock.on("data", (d) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const msg = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (msg.method === "initialize") {
          send({ id: msg.id, result: { protocolVersion: 1, serverVersion: "fake", backends: [], limits: {} } });
        } else if (msg.method !== "initialized") onMessage(msg, send, sock);
      }
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    port: srv.address().port,
    close: () => { for (const s of conns) s.destroy(); srv.close(); },
  };
}

test("a line longer than maxLineBytes closes the connection instead of filling memory", async () => {
  const cap = 1 << 20, total = 64 << 20;
  const stopped = deferred();
  const srv = await fakeServer((msg, send, sock) => {
    if (msg.method !== "gate/list") return;
    // An answer that never ends: 64 MiB without a newline, written as fast
    // as the client reads it.
    const piece = Buffer.alloc(64 << 10, 0x61);
    let written = 0;
    sock.write('{"jsonrpc":"2.0","id":' + msg.id + ',"result":"');
    const pump = () => {
      while (written < total && !sock.destroyed) {
        written += piece.length;
        if (!sock.write(piece)) return sock.once("drain", pump);
      }
      stopped.resolve(written);
    };
    sock.once("close", () => stopped.resolve(written));
    pump();
  });
  try {
    const c = await Client.connectTcp("127.0.0.1", srv.port, { token: "t", maxLineBytes: cap });
    await assert.rejects(withTimeout(c.listGates(), "the refusal"), (e) =>
      e instanceof ConnectionClosedError && e.message.includes(`over ${cap} bytes`));
    assert.ok(c.closed);
    const written = await withTimeout(stopped.promise, "the server's writes to stop");
    assert.ok(written < total, `the client read all ${written} bytes of the line`);
    await c.close();
  } finally {
    srv.close();
  }
});

test("LineSplitter: lines up to the cap pass, across chunks; a longer one throws", () => {
  const s = new LineSplitter(10);
  assert.deepEqual(s.push(Buffer.from("abc")).map(String), []);
  assert.deepEqual(s.push(Buffer.from("defghij\nxy\n12")).map(String), ["abcdefghij", "xy"]);
  assert.deepEqual(s.push(Buffer.from("3\n")).map(String), ["123"]);
  s.push(Buffer.from("0123456789"));
  assert.throws(() => s.push(Buffer.from("x")), /over 10 bytes/);
  assert.throws(() => new LineSplitter(4).push(Buffer.from("12345\n")), /over 4 bytes/);
});

test("a flood of gate calls: at most gateWorkers run, maxQueuedCalls wait, the rest are refused at once", async () => {
  const answers = [];
  const allAnswered = deferred(), refused = deferred();
  const N = 20, workers = 2, queued = 3;
  const srv = await fakeServer((msg, send) => {
    if (msg.method === "gate/register") {
      send({ id: msg.id, result: {} });
      for (let i = 0; i < N; i++) {
        send({ id: `s${i}`, method: "gate/call", params: {
          callId: `c${i}`, gate: "slow", args: [String(i)], stdin: null, cwd: "", processId: "p1", sandboxId: "sb1", deadlineMs: 0,
        } });
      }
    } else if (msg.id != null && msg.method == null) {
      answers.push(msg);
      if (answers.length === N - workers - queued) refused.resolve();
      if (answers.length === N) allAnswered.resolve();
    }
  });
  try {
    const release = deferred();
    let running = 0, most = 0;
    const c = await Client.connectTcp("127.0.0.1", srv.port, { token: "t", gateWorkers: workers, maxQueuedCalls: queued });
    await c.registerGate("slow", async (call) => {
      most = Math.max(most, ++running);
      await release.promise;
      running--;
      return `done ${call.args[0]}\n`;
    });
    // The refusals come before any gate returns.
    await withTimeout(refused.promise, "the refusals");
    assert.equal(answers.length, N - workers - queued);
    assert.ok(answers.every((a) => a.error?.code === LIMIT), JSON.stringify(answers[0]));
    release.resolve();
    await withTimeout(allAnswered.promise, "every answer");
    assert.equal(answers.filter((a) => a.result).length, workers + queued);
    assert.equal(most, workers);
    await c.close();
  } finally {
    srv.close();
  }
});

test("junk from the server is ignored; an unknown request is answered method-not-found", async () => {
  const got = deferred();
  const srv = await fakeServer((msg, send, sock) => {
    if (msg.method === "process/list") {
      sock.write("not json\n[1,2]\nnull\n\n");
      send({ id: 999999, result: {} }); // no such request
      send({ id: "x", error: { code: 1, message: "nobody asked" } });
      send({ method: "process/output", params: { processId: "nope", seq: 1, stream: "stdout", chunk: "aGk=" } });
      send({ method: "process/exited", params: { processId: "nope", exitCode: 0, timedOut: false } });
      send({ method: "$/cancelRequest", params: { id: "never" } });
      send({ method: "no/such/notification", params: {} });
      send({ id: "s9", method: "no/such/request", params: {} });
      send({ id: msg.id, result: { processes: [{ processId: "p1" }] } });
    } else if (msg.id === "s9") {
      got.resolve(msg);
    }
  });
  const warn = console.warn;
  console.warn = () => {};
  try {
    const c = await Client.connectTcp("127.0.0.1", srv.port, { token: "t" });
    assert.deepEqual(await c.listProcesses(), [{ processId: "p1" }]);
    const answer = await withTimeout(got.promise, "the method-not-found answer");
    assert.equal(answer.error.code, METHOD_NOT_FOUND);
    assert.ok(!c.closed);
    await c.close();
  } finally {
    console.warn = warn;
    srv.close();
  }
});

test("over stdio too: the endless line ends the connection, and close() leaves no child", async () => {
  // A fake `gatebridge serve --stdio`: answers initialize, then floods one line.
  const script = `
    let buf = "";
    process.stdin.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\\n")) >= 0) {
        const m = JSON.parse(buf.slice(0, i)); buf = buf.slice(i + 1);
        if (m.method === "initialize") process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1 } }) + "\\n");
        if (m.method === "gate/list") {
          const piece = "a".repeat(1 << 16);
          const pump = () => { while (process.stdout.write(piece)); process.stdout.once("drain", pump); };
          process.stdout.write('{"jsonrpc":"2.0","id":' + m.id + ',"result":"'); pump();
        }
      }
    });
    process.stdin.on("end", () => process.exit(0));
    process.stdout.on("error", () => process.exit(3));`;
  const c = await Client.start({ argv: [process.execPath, "-e", script], maxLineBytes: 1 << 20 });
  await assert.rejects(withTimeout(c.listGates(), "the refusal"), (e) =>
    e instanceof ConnectionClosedError && e.message.includes(`over ${1 << 20} bytes`));
  const pid = c.pid;
  await c.close({ timeout: 5 });
  assert.notEqual(c._child.exitCode ?? c._child.signalCode, null, "the fake server still runs after close()");
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" });
});

test("a malformed gate/call is answered with an error and frees its worker", async () => {
  const answers = new Map();
  const done = deferred();
  const call = (id, extra) => ({ id, method: "gate/call", params: {
    callId: id, gate: "g", args: ["a", "b"], stdin: null, cwd: "", processId: "p1", sandboxId: "sb1", deadlineMs: 0, ...extra,
  } });
  const srv = await fakeServer((msg, send) => {
    if (msg.method === "gate/register") {
      send({ id: msg.id, result: {} });
      send(call("s1", { argsBase64: ["YQ=="] })); // one entry for two arguments
      send(call("s2", { argsBase64: "not a list" }));
      send(call("s3", {}));
    } else if (msg.id != null && msg.method == null) {
      answers.set(msg.id, msg);
      if (answers.size === 3) done.resolve();
    }
  });
  try {
    const c = await Client.connectTcp("127.0.0.1", srv.port, { token: "t", gateWorkers: 1 });
    await c.registerGate("g", (call) => call.args.join(" "));
    await withTimeout(done.promise, "three answers");
    assert.match(answers.get("s1").error?.message ?? "", /argsBase64/);
    assert.deepEqual(answers.get("s3").result, { exitCode: 0, stdout: Buffer.from("a b").toString("base64") });
    assert.ok(answers.get("s2").result, "a non-list argsBase64 is ignored (args as sent)");
    await c.close();
  } finally {
    srv.close();
  }
});

test("a malformed gate-call report loses that report only, not the exit", async () => {
  const srv = await fakeServer((msg, send) => {
    if (msg.method === "sandbox/open") {
      send({ id: msg.id, result: { sandboxId: msg.params.sandboxId, backend: "local", workspaceInside: "/w", reason: "" } });
    } else if (msg.method === "process/start") {
      const pid = msg.params.processId;
      send({ id: msg.id, result: { processId: pid } });
      const bad = { callId: `${pid}:1`, gate: "g", args: ["a"], argsBase64: ["YQ==", "Yg=="], exitCode: 0, decision: "ran" };
      const good = { callId: `${pid}:2`, gate: "g", args: ["caf\ufffd"], argsBase64: ["Y2Fm6Q=="], exitCode: 3, decision: "ran", durationMs: 1500 };
      send({ method: "process/gateCall", params: { processId: pid, call: bad } });
      send({ method: "process/gateCall", params: { processId: pid, call: "nonsense" } });
      send({ method: "process/exited", params: { processId: pid, exitCode: 0, timedOut: false, gateCalls: [bad, 7, good], gateCallsDropped: 2 } });
    }
  });
  const warn = console.warn;
  console.warn = () => {};
  try {
    const c = await Client.connectTcp("127.0.0.1", srv.port, { token: "t" });
    const sb = await c.openSandbox({ backend: "local", workspace: "/tmp" });
    const seen = [];
    const r = await withTimeout(sb.run("x", { onGateCall: (g) => { seen.push(g); } }), "the exit");
    assert.equal(r.exitCode, 0);
    assert.deepEqual(seen, []);
    assert.deepEqual(r.gateCalls.map((g) => [g.callId, g.exitCode, g.duration]), [["p1:2", 3, 1.5]]);
    assert.ok(Buffer.from(r.gateCalls[0].argsBytes[0]).equals(Buffer.from("caf\xe9", "latin1")));
    assert.equal(r.gateCallsDropped, 2);
    await c.close();
  } finally {
    console.warn = warn;
    srv.close();
  }
});
