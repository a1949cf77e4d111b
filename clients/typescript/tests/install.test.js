// `npm install ./clients/typescript` works offline (no dependencies), and
// the installed package imports, in JavaScript and, when tsc is here, in
// TypeScript with nothing but the ES library (no DOM, no @types/node).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { rmrf } from "./helpers.js";

const HERE = dirname(dirname(fileURLToPath(import.meta.url)));
const has = (cmd) => spawnSync(cmd, ["--version"]).status === 0;

test("npm install, offline, then import", { skip: has("npm") ? false : "no npm" }, (t) => {
  const app = mkdtempSync(join(tmpdir(), "gb-jsclient-app-"));
  t.after(() => rmrf(app));
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", type: "module", private: true }));
  const npm = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund", HERE], {
    cwd: app, encoding: "utf8", env: { ...process.env, npm_config_cache: join(app, ".npm") },
  });
  assert.equal(npm.status, 0, npm.stdout + npm.stderr);
  writeFileSync(join(app, "use.mjs"),
    'import { Client, PROTOCOL_VERSION, UnauthorizedError } from "gatebridge-client";\n' +
    'console.log(typeof Client.start, PROTOCOL_VERSION, new UnauthorizedError("x").code);\n');
  const run = spawnSync(process.execPath, ["use.mjs"], { cwd: app, encoding: "utf8" });
  assert.equal(run.stdout, "function 1 -32006\n", run.stderr);
  if (!has("tsc")) return t.diagnostic("no tsc: the TypeScript import is not checked");
  writeFileSync(join(app, "use.ts"),
    'import { Client, GateCall } from "gatebridge-client";\n' +
    "export async function f(): Promise<number> {\n" +
    "  const c = await Client.start();\n" +
    '  await c.registerGate("g", async (call: GateCall) => (call.signal.aborted ? 1 : `hi ${call.args[0]}\\n`));\n' +
    "  return c.limits.gateTimeoutMs;\n}\n");
  const tsc = spawnSync("tsc", ["--noEmit", "--strict", "--target", "es2022", "--module", "node16", "--moduleResolution", "node16",
    "--lib", "es2022", "use.ts"], { cwd: app, encoding: "utf8" });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});
