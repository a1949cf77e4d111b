// The client against the real server, on every backend that is wanted
// (tests/helpers.js says how they are chosen). No test uses a sleep as its
// assertion: ordering is shown by handshakes (the command waits on stdin
// for the test, the gate waits for the command).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import {
  ConflictError, ConnectionClosedError, GatebridgeError, InvalidParamsError, NotFoundError, RunResult, TimeoutError,
  UnavailableError,
} from "../index.js";
import {
  REQUIRED, Recorder, WAIT, backendWanted, configHome, deferred, newClient, openExtra, pidAlive, pidsWith, rmrf, uniq, withTimeout,
  workspace,
} from "./helpers.js";

/** A client with an open sandbox on backend, or why the backend cannot run. */
async function probe(backend) {
  const why = backendWanted(backend);
  if (why) return { why };
  const approvals = [];
  const client = await newClient({ onApproval: (req) => approvals.at(-1)?.(req) ?? "deny" });
  const ws = workspace();
  try {
    const sb = await client.openSandbox({ backend, workspace: ws, ...openExtra(backend) });
    const r = await sb.run(["true"]);
    if (r.exitCode !== 0) throw new UnavailableError(`\`true\` exited ${r.exitCode}: ${r.stderrText.trim()}`);
    return { client, sb, ws, approvals };
  } catch (e) {
    await client.close();
    rmrf(ws);
    if (!(e instanceof GatebridgeError)) throw e;
    const msg = `backend ${backend} cannot run here: ${e.message}`;
    if (REQUIRED.includes(backend)) return { fail: `backend ${backend} is required (GATEBRIDGE_REQUIRE_BACKENDS) but cannot run: ${e.message}` };
    return { why: msg };
  }
}

for (const backend of ["local", "bwrap", "docker"]) {
  const env = await probe(backend);
  if (env.fail) {
    describe(backend, () => test("the backend runs", () => assert.fail(env.fail)));
    continue;
  }
  describe(backend, { skip: env.why ?? false }, () => {
    const { client, sb, ws } = env;
    after(async () => {
      await client?.close();
      if (ws) rmrf(ws);
    });
    /** Gates live as long as the connection: each test registers its own names. */
    const gate = async (base, fn, opts) => {
      const name = uniq(base);
      await client.registerGate(name, fn, opts);
      return name;
    };

    test("the file API: bytes and names round-trip, hostile paths are refused", async () => {
      const w = workspace();
      mkdirSync(join(w, ".git"));
      writeFileSync(join(w, ".git", "config"), "[core]\n");
      const s = await client.openSandbox({ backend, workspace: w, writableWorkspace: true, ...openExtra(backend) });
      try {
        const name = Buffer.from("d/caf\xff.bin", "latin1"); // not UTF-8
        await s.fs.write(name, Buffer.from("\0hello"));
        await s.fs.append(name, " world");
        assert.ok((await s.readFile(name)).equals(Buffer.from("\0hello world")));
        const r = await s.run("cat d/caf*");
        assert.ok(Buffer.from(r.stdout).equals(Buffer.from("\0hello world")));
        const [e] = await s.fs.list("d");
        assert.ok(e.nameBytes.equals(Buffer.from("caf\xff.bin", "latin1")));
        assert.equal(e.type, "file");
        assert.equal(e.size, 12);
        assert.ok(e.mtime > 1e9 && e.mtime < 1e11, `mtime ${e.mtime} is not in seconds`);
        const big = Buffer.alloc(Number(client.limits.maxFsChunkBytes) + 10, 7);
        await s.writeFile(`${s.workspaceInside}/big.bin`, big);
        assert.ok((await s.fs.read("big.bin")).equals(big));
        assert.deepEqual((await s.fs.list()).map((x) => x.name), [".git", "big.bin", "d"]);
        await s.fs.mkdir("e/f", { recursive: true });
        await s.fs.rename("big.bin", "e/f/big.bin");
        assert.equal((await s.fs.stat("e/f")).isDirectory, true);
        await s.fs.remove("e", { recursive: true });
        assert.equal(await s.fs.exists("e"), false);
        symlinkSync("/etc", join(w, "x"));
        for (const [bad, why] of [["x/passwd", /symbolic link/], ["../etc/passwd", /leaves the workspace/],
          ["/etc/passwd", /outside the workspace/], [".git/config", /protected/]]) {
          await assert.rejects(s.fs.read(bad), (err) => err instanceof InvalidParamsError && why.test(err.message));
        }
        await assert.rejects(s.fs.write(".git/config", "evil"), /protected/);
        assert.equal(readFileSync(join(w, ".git", "config"), "utf8"), "[core]\n");
      } finally {
        await s.close();
      }
      const ro = await client.openSandbox({ backend, workspace: w, ...openExtra(backend) });
      try {
        await assert.rejects(ro.fs.write("new.txt", "x"), /read-only/);
      } finally {
        await ro.close();
        rmrf(w);
      }
    });

    test("output, stdin and exit code, byte for byte", async () => {
      const data = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from("\0tail without newline")]);
      const r = await sb.run(["sh", "-c", "cat; printf 'e\\001\\377\\000x' >&2; exit 7"], { stdin: data });
      assert.ok(r instanceof RunResult);
      assert.equal(r.exitCode, 7);
      assert.ok(Buffer.from(r.stdout).equals(data));
      assert.ok(Buffer.from(r.stderr).equals(Buffer.from("e\x01\xff\x00x", "latin1")));
      assert.equal(r.signal, null);
      assert.equal(r.timedOut, false);
      assert.equal(r.ok, false);
      const [code, out] = r;
      assert.equal(code, 7);
      assert.equal(out, r.stdout);
    });

    test("a string runs under sh; an array is an exact argv; cwd", async () => {
      assert.equal((await sb.run("echo $((1+2))")).stdoutText, "3\n");
      assert.equal((await sb.run(["printf", "%s|", "a b", "$HOME", ""])).stdoutText, "a b|$HOME||");
      const r = await sb.run(["pwd"]);
      assert.equal(r.stdoutText.trim(), sb.workspaceInside);
    });

    test("output streams before the exit: callback and async iterator", async () => {
      const rec = new Recorder();
      // It prints, then waits for the test on stdin: "one" must arrive while it runs.
      const p = await sb.start(["sh", "-c", "echo one; read x; echo two $x; echo err >&2"], { onOutput: rec.cb });
      const seen = [];
      const iter = (async () => { for await (const c of p) seen.push([c.seq, c.stream, Buffer.from(c.data).toString()]); })();
      await rec.waitFor("one\n");
      assert.ok(p.running);
      assert.equal(p.exitCode, null);
      await p.write("ok\n");
      await p.closeStdin();
      const r = await p.wait({ timeout: WAIT });
      await withTimeout(iter, "the iterator's end");
      assert.equal(r.stdoutText, "one\ntwo ok\n");
      assert.equal(r.stderrText, "err\n");
      assert.equal(rec.text(), "one\ntwo ok\n");
      // stdout and stderr are separate pipes: their order against each other is not kept.
      assert.equal(seen.filter((s) => s[1] === "stdout").map((s) => s[2]).join(""), "one\ntwo ok\n");
      assert.equal(seen.filter((s) => s[1] === "stderr").map((s) => s[2]).join(""), "err\n");
      assert.deepEqual(seen.map((s) => s[0]), seen.map((_, i) => i + 1), "seq counts from 1 across both streams");
      // An iterator started after the exit replays the kept output and ends.
      const again = [];
      for await (const c of p) again.push(Buffer.from(c.data).toString());
      assert.equal(again.join(""), seen.map((s) => s[2]).join(""));
    });

    test("tty: a terminal, its size, resize, stdin typed at it, one stream, exit code", async (t) => {
      assert.equal((await sb.run("test -t 0 && echo tty || echo notty")).stdoutText, "notty\n");
      const rec = new Recorder();
      const script = "tty -s && echo tty; stty size; echo to-stderr >&2; " +
        "trap 'echo \"winch $(stty size)\"; W=1' WINCH; stty -echo; echo ready; " +
        "while [ -z \"$W\" ]; do sleep 0.05; done; read line; echo \"got $line\"; exit 7";
      let p;
      try {
        p = await sb.start(["sh", "-c", script], { tty: { rows: 20, cols: 70 }, onOutput: rec.cb });
      } catch (e) {
        if (backend !== "docker" || !(e instanceof InvalidParamsError)) throw e;
        assert.match(e.message, /docker/);
        t.skip(`this docker sandbox cannot open a terminal: ${e.message}`);
        return;
      }
      await rec.waitFor("ready");
      assert.equal(await p.resize(40, 100), true);
      await rec.waitFor("winch");
      await p.write("hello\n");
      const r = await p.wait();
      assert.equal(r.exitCode, 7);
      assert.equal(r.stdoutText.replaceAll("\r\n", "\n"), "tty\n20 70\nto-stderr\nready\nwinch 40 100\ngot hello\n");
      assert.equal(r.stderr.length, 0);
      assert.equal(await p.resize(10, 10), false); // exited
      const plain = await sb.start("true", { stdin: false });
      await assert.rejects(plain.resize(10, 10), InvalidParamsError);
      await plain.wait();
      const timed = await sb.run("echo started; sleep 600", { tty: { rows: 24, cols: 80 }, timeout: 0.5 });
      assert.equal(timed.timedOut, true);
      assert.equal(timed.exitCode, 124);
    });

    test("arg0: the argv[0] the command sees, or refused naming the backend", async (t) => {
      // busybox (the docker test image) picks its applet by argv[0]: a login shell's -sh works everywhere.
      let r;
      try {
        r = await sb.run(["sh", "-c", "tr '\\0' ' ' < /proc/$$/cmdline; echo"], { arg0: "-sh" });
      } catch (e) {
        if (!["bwrap", "docker"].includes(backend) || !(e instanceof InvalidParamsError)) throw e;
        assert.ok(e.message.includes(`"${backend}"`), e.message);
        t.skip(`refused, naming the backend: ${e.message}`);
        return;
      }
      assert.ok(r.stdoutText.startsWith("-sh -c "), r.stdoutText);
    });

    test("stdin: interactive writes, then end of file", async () => {
      const rec = new Recorder();
      const p = await sb.start(["sh", "-c", "while read l; do echo \"got $l\"; done; echo eof"], { onOutput: rec.cb });
      await p.write("a\n");
      await rec.waitFor("got a\n");
      await p.write(Buffer.from("b\n"));
      await rec.waitFor("got b\n");
      await p.closeStdin();
      const r = await p.wait({ timeout: WAIT });
      assert.equal(r.stdoutText, "got a\ngot b\neof\n");
      const noStdin = await sb.start(["true"], { stdin: false });
      await assert.rejects(noStdin.write("x"), InvalidParamsError);
    });

    test("a signal ends the process: exit code and signal name", async () => {
      const rec = new Recorder();
      const p = await sb.start(["sh", "-c", "echo up; exec sleep 30"], { stdin: false, onOutput: rec.cb });
      await rec.waitFor("up\n");
      assert.equal(await p.signal("TERM"), true);
      const r = await p.wait({ timeout: WAIT });
      assert.equal(r.exitCode, 143);
      assert.equal(r.signal, "TERM");
      assert.equal(await p.kill(), false, "signalling an exited process says false");
      await assert.rejects(p.signal("STOP"), TypeError);
    });

    test("a process's timeout stops it (timedOut, 124)", async () => {
      const r = await sb.run(["sleep", "30"], { timeout: 0.3 });
      assert.equal(r.exitCode, 124);
      assert.equal(r.timedOut, true);
    });

    test("wait with a timeout rejects with TimeoutError and leaves it running", async () => {
      const rec = new Recorder();
      const p = await sb.start(["sh", "-c", "echo up; read x; exit 0"], { onOutput: rec.cb });
      await rec.waitFor("up\n");
      await assert.rejects(p.wait({ timeout: 0.05 }), TimeoutError);
      assert.ok(p.running);
      await p.closeStdin();
      assert.equal((await p.wait({ timeout: WAIT })).exitCode, 0);
    });

    test("read, snapshot, status and listProcesses", async () => {
      const p = await sb.start(["sh", "-c", "echo a; echo b >&2"], { stdin: false });
      await p.wait({ timeout: WAIT });
      const rd = await p.read({ afterSeq: 0 });
      assert.equal(rd.exited, true);
      assert.equal(rd.exitCode, 0);
      const text = (stream) => rd.chunks.filter((c) => c.stream === stream).map((c) => Buffer.from(c.data).toString()).join("");
      assert.equal(text("stdout"), "a\n");
      assert.equal(text("stderr"), "b\n");
      assert.equal(rd.nextSeq, 3);
      const snap = await p.snapshot();
      assert.equal(Buffer.from(snap.stdout).toString(), "a\n");
      assert.equal(snap.running, false);
      assert.deepEqual(await p.status({ timeout: 1 }), { exitCode: 0, timedOut: false, running: false });
      const list = await client.listProcesses();
      assert.ok(list.some((x) => x.processId === p.id && x.exitCode === 0));
    });

    test("errors are typed, with code, data and hint", async () => {
      await assert.rejects(sb.run(["true"], { cwd: "/nonexistent/outside" }), (e) =>
        e instanceof InvalidParamsError && e instanceof GatebridgeError && e.code === -32602 && /cwd/.test(e.message));
      await assert.rejects(client.request("process/wait", { processId: "nope" }), (e) => e instanceof NotFoundError && e.code === -32001);
      const name = await gate("dup", () => "");
      await assert.rejects(client.registerGate(name, () => ""), ConflictError);
      await assert.rejects(client.openSandbox({ backend: "nosuch", workspace: ws }), InvalidParamsError);
      await assert.rejects(client.openSandbox({ backend, workspace: "relative/dir" }), InvalidParamsError);
      await client.unregisterGate(name);
      await assert.rejects(client.unregisterGate(name), NotFoundError);
    });

    test("a runtime gate answered by an async function: args, stdin, exit code, stderr", async () => {
      const calls = [];
      const name = await gate("jsgate", async (call) => {
        calls.push(call);
        await new Promise((r) => setTimeout(r, 1)); // really async
        return [3, `args=${call.args.join(",")} stdin=${call.stdinText}\n`, "to stderr\n"];
      }, { summary: "a test gate", stdin: "always" });
      const r = await sb.run(`printf 'piped\\nin' | ${name} a 'b c'; echo "exit=$?"`);
      assert.equal(r.stdoutText, "args=a,b c stdin=piped\nin\nexit=3\n");
      assert.equal(r.stderrText, "to stderr\n");
      assert.equal(calls.length, 1);
      assert.equal(calls[0].gate, name);
      assert.equal(calls[0].sandboxId, sb.id);
      assert.equal(calls[0].sandbox, sb);
      assert.ok(calls[0].deadline > Date.now() / 1000);
      const gates = await client.listGates();
      assert.ok(gates.some((g) => g.name === name && g.kind === "runtime" && g.summary === "a test gate"));
    });

    test("gate calls reported: process/exited's gateCalls, onGateCall, exact args", async () => {
      const ids = [];
      const name = await gate("reported", (call) => { ids.push(call.callId); return call.args[0] === "fail" ? [3, "", "no\n"] : "ok\n"; });
      const seen = [];
      const r = await sb.run(`${name} "$(printf 'caf\\351')" x; ${name} fail 2>/dev/null; echo rc=$?`, { onGateCall: (c) => { seen.push(c); } });
      assert.equal(r.stdoutText, "ok\nrc=3\n");
      assert.deepEqual(r.gateCalls.map((c) => [c.gate, c.exitCode, c.decision]), [[name, 0, "ran"], [name, 3, "ran"]]);
      assert.ok(Buffer.from(r.gateCalls[0].argsBytes[0]).equals(Buffer.from([0x63, 0x61, 0x66, 0xe9])));
      assert.equal(r.gateCalls[0].args[1], "x");
      assert.equal(r.gateCallsDropped, 0);
      assert.ok(r.gateCalls[1].duration >= 0 && r.gateCalls[1].duration < 60, "seconds, not milliseconds");
      assert.deepEqual(seen.map((c) => c.callId), r.gateCalls.map((c) => c.callId));
      assert.deepEqual(r.gateCalls.map((c) => c.callId), ids); // the gate/call's callId
      assert.deepEqual((await sb.run("true")).gateCalls, []);
      const p = await sb.start(`${name} a`, { stdin: false });
      await p.wait({ timeout: WAIT });
      assert.deepEqual(p.gateCalls.map((c) => c.args), [["a"]]);
    });

    test("a gate's return forms, and streaming before it returns", async () => {
      const wrote = deferred();
      const name = await gate("forms", async (call) => {
        switch (call.args[0]) {
          case "num": return 4;
          case "obj": return { exitCode: 0, stdout: Buffer.from([0xff, 0x0a]) };
          case "none": return undefined;
          case "stream":
            call.writeStdout("early\n");
            await wrote.promise; // the caller has printed it before the gate answers
            return "late\n";
          default: return true; // not an answer: the caller exits 1
        }
      });
      const rec = new Recorder();
      const p = await sb.start(["sh", "-c", `${name} stream`], { stdin: false, onOutput: rec.cb });
      await rec.waitFor("early\n");
      wrote.resolve();
      assert.equal((await p.wait({ timeout: WAIT })).stdoutText, "early\nlate\n");
      assert.equal((await sb.run(`${name} num`)).exitCode, 4);
      assert.ok(Buffer.from((await sb.run(`${name} obj`)).stdout).equals(Buffer.from([0xff, 0x0a])));
      assert.equal((await sb.run(`${name} none`)).exitCode, 0);
      const bad = await sb.run(`${name} bool`);
      assert.equal(bad.exitCode, 1);
      assert.match(bad.stderrText, /TypeError: a gate returned boolean/);
    });

    test("a gate that throws: the caller exits 1 with the message", async () => {
      const name = await gate("throws", async () => { throw new Error("the store is full"); });
      const r = await sb.run(name);
      assert.equal(r.exitCode, 1);
      assert.match(r.stderrText, /the store is full/);
    });

    test("arguments that are not UTF-8 arrive exact in argsBytes", async () => {
      let got;
      const name = await gate("bytes", (call) => { got = call; return ""; });
      await sb.run(`${name} "$(printf 'a\\376')" '\\xff'`);
      assert.ok(Buffer.from(got.argsBytes[0]).equals(Buffer.from([0x61, 0xfe])));
      assert.equal(got.args[1], "\\xff");
      assert.equal(got.args[0], "a\ufffd");
    });

    test("approvals: the handler denies (126, reason shown) or allows", async () => {
      const asked = [];
      env.approvals.push(async (req) => {
        asked.push([req.gate, req.args]);
        return req.args.includes("production") ? ["deny", "needs a human"] : "allow";
      });
      try {
        let ran = 0;
        const name = await gate("deploy", (call) => { ran++; return `deployed ${call.args[0]}\n`; }, { approval: true });
        const ok = await sb.run(`${name} staging`);
        assert.equal(ok.stdoutText, "deployed staging\n");
        const no = await sb.run(`${name} production`);
        assert.equal(no.exitCode, 126);
        assert.match(no.stderrText, /needs a human/);
        assert.equal(ran, 1, "a denied gate ran");
        assert.deepEqual(asked, [[name, ["staging"]], [name, ["production"]]]);
      } finally {
        env.approvals.pop();
      }
    });

    test("approvals: the handler sees the offers and may return a grant (kept, or for the connection only)", async () => {
      const asked = [];
      env.approvals.push(async (req) => {
        asked.push(req);
        if (req.args[0] === "keep") return req.offer("always", "exact");
        if (req.args[0] === "conn") return { decision: "allow", grant: req.offer("always", "exact"), connectionOnly: true };
        return ["deny", "not that"];
      });
      try {
        const name = await gate("granted", (call) => `ran:${call.args[0]}\n`, { approval: true });
        const r = await sb.run(`${name} keep; ${name} keep; ${name} conn; ${name} conn; ${name} other; echo rc=$?`);
        assert.equal(r.stdoutText, "ran:keep\nran:keep\nran:conn\nran:conn\nrc=126\n");
        assert.deepEqual(asked.map((a) => a.args), [["keep"], ["conn"], ["other"]]);
        assert.equal(asked[0].offers[0].scope, "any");
        assert.equal(asked[0].offers[0].lifetime, "session");
        assert.match(asked[0].offers[0].description, new RegExp(name));
        const stored = readFileSync(join(configHome, "gatebridge", "grants.yaml"), "utf8");
        assert.match(stored, new RegExp(name));
        assert.match(stored, /keep/);
        assert.doesNotMatch(stored, /conn/);
      } finally {
        env.approvals.pop();
      }
    });

    test("approvals without a handler are denied", async () => {
      env.approvals.push(() => undefined); // falls back to "deny" in probe's onApproval
      try {
        const name = await gate("guarded", () => "ran\n", { approval: true });
        const r = await sb.run(name);
        assert.equal(r.exitCode, 126);
        assert.equal(r.stdoutText, "");
      } finally {
        env.approvals.pop();
      }
    });

    test("a gate whose caller is killed is cancelled (its AbortSignal fires)", async () => {
      const started = deferred(), cancelled = deferred();
      const name = await gate("waits", (call) => new Promise((res) => {
        started.resolve();
        call.signal.addEventListener("abort", () => { cancelled.resolve(); res(""); });
      }));
      const p = await sb.start(["sh", "-c", name], { stdin: false });
      await withTimeout(started.promise, "the gate's start");
      await p.kill();
      await p.wait({ timeout: WAIT });
      await withTimeout(cancelled.promise, "the gate's cancellation");
    });

    test("files persist in a writable workspace", async () => {
      const w = workspace();
      try {
        const s = await client.openSandbox({ backend, workspace: w, writableWorkspace: true, ...openExtra(backend) });
        assert.ok(client.sandboxes.includes(s));
        const r1 = await s.run("mkdir -p sub && printf 'hello\\000' > sub/f.bin && echo wrote");
        assert.equal(r1.stdoutText, "wrote\n", r1.stderrText);
        assert.equal((await s.run(["cat", "f.bin"], { cwd: "sub" })).stdoutText, "hello\0");
        await s.close();
        assert.ok(!client.sandboxes.includes(s));
        assert.equal(readFileSync(join(w, "sub", "f.bin"), "latin1"), "hello\0");
      } finally {
        rmrf(w);
      }
    });

    test("closing a sandbox stops its processes", async () => {
      const s = await client.openSandbox({ backend, workspace: ws, ...openExtra(backend) });
      const rec = new Recorder();
      const p = await s.start(["sh", "-c", "echo up; sleep 30"], { stdin: false, onOutput: rec.cb });
      await rec.waitFor("up\n");
      await s.close();
      const r = await p.wait({ timeout: WAIT });
      assert.notEqual(r.exitCode, 0);
      await assert.rejects(s.start(["true"], { stdin: false }), GatebridgeError);
    });

    test("closing the client leaves nothing: no server, no sandboxed process", async () => {
      const c = await newClient();
      const w = workspace();
      try {
        const marker = uniq("gbjs-marker");
        const s = await c.openSandbox({ backend, workspace: w, ...openExtra(backend) });
        const rec = new Recorder();
        const p = await s.start(["sh", "-c", "echo up; sleep 30; :", marker], { stdin: false, onOutput: rec.cb });
        await rec.waitFor("up\n");
        // Docker's processes are visible here only when the engine runs on this host.
        const visible = pidsWith(marker).length > 0;
        if (backend !== "docker") assert.ok(visible, "the test's own sandboxed process is not visible in /proc");
        const pid = c.pid;
        assert.ok(pid > 0);
        await c.close();
        assert.ok(c.closed);
        assert.equal(c._child.exitCode, 0, "the server did not exit 0 after close()");
        assert.equal(pidAlive(pid), false, "the server process remains");
        if (visible) assert.deepEqual(pidsWith(marker), [], "a sandboxed process outlived close()");
        if (backend === "docker") {
          const ps = spawnSync("docker", ["ps", "-aq", "--filter", `name=rpc-${pid}-`], { encoding: "utf8" });
          if (ps.status === 0) assert.equal(ps.stdout.trim(), "", "the sandbox's container outlived close()");
        }
        await assert.rejects(p.wait({ timeout: WAIT }).then(() => { throw new ConnectionClosedError("ended with the connection"); }), ConnectionClosedError);
        await assert.rejects(c.listGates(), ConnectionClosedError);
        await c.close(); // twice is fine
      } finally {
        rmrf(w);
      }
    });
  });
}
