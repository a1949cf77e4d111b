// Compiled, never run (tsc --noEmit): the public types of index.d.ts in
// use, as a TypeScript runtime would write them. A change of index.d.ts
// that breaks such code fails `make test-clients`.
import {
  Client, ConnectionClosedError, GatebridgeError, GateCall, InvalidParamsError, RunResult, UNAUTHORIZED, Chunk,
  GateCallReport,
} from "../index.js";
import type { Grant } from "../index.js";

async function use(): Promise<number> {
  const client = await Client.start({
    onApproval: async (req) => {
      if (req.gate === "deploy") return ["deny", "not now"];
      const g: Grant | undefined = req.offer("workspace", "exact");
      if (g && req.rule === "") return req.offers.length > 1 ? g : { decision: "allow", grant: g, connectionOnly: true };
      return "allow";
    },
    stderr: "ignore",
  });
  await client.registerGate("lookup", async (call: GateCall) => {
    if (call.cancelled || call.signal.aborted) return 1;
    call.writeStderr("looking up\n");
    return { exitCode: 0, stdout: `found ${call.args.join(" ")}\n` };
  }, { summary: "Look a word up", usage: "lookup WORD", stdin: "if-no-args", timeout: 5 });
  const sb = await client.openSandbox({ backend: "auto", workspace: "/tmp", writableWorkspace: true });
  const r: RunResult = await sb.run("lookup x", { timeout: 30, onOutput: (stream, data) => void [stream, data.length] });
  const [code, out] = r;
  const calls: GateCallReport[] = r.gateCalls;
  void [calls[0]?.argsBytes[0]?.length, calls[0]?.decidedBy ?? "none", calls[0]?.duration, r.gateCallsDropped];
  await sb.run("lookup y", { onGateCall: (c) => void [c.gate, c.decision === "denied", c.events.length] });
  const p = await sb.start(["cat"], { stdin: true });
  await p.write("hello\n");
  await p.closeStdin();
  for await (const chunk of p) {
    const c: Chunk = chunk;
    void c.seq;
  }
  await p.signal("TERM");
  await p.signal(9);
  const term = await sb.start(["sh"], { tty: { rows: 24, cols: 80 }, arg0: "-sh" });
  const resized: boolean = await term.resize(50, 132);
  void resized;
  const res = await p.wait({ timeout: 1.5 });
  try {
    await Client.connectTcp("127.0.0.1", 7800, { token: "t", cafile: "/tmp/cert.pem" });
  } catch (e) {
    if (e instanceof GatebridgeError && e.code === UNAUTHORIZED) return e.hint?.length ?? 0;
    if (e instanceof InvalidParamsError || e instanceof ConnectionClosedError) return e.code;
  }
  const gates = await client.listGates();
  await client.close({ timeout: 5 });
  return (code as number) + (out as Uint8Array).length + res.exitCode + r.stdoutText.length + gates.length +
    client.limits.gateTimeoutMs + (client.pid ?? 0);
}
void use;
