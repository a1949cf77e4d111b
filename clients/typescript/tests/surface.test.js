// index.d.ts is hand-written: it must declare what index.js exports, and
// each class's methods and getters must exist. (tsc checks the rest:
// typecheck.test.js.)

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import * as mod from "../index.js";

const HERE = dirname(dirname(fileURLToPath(import.meta.url)));
const dts = readFileSync(join(HERE, "index.d.ts"), "utf8");

test("index.d.ts declares exactly what index.js exports", () => {
  const declared = [...dts.matchAll(/^export declare (?:const|class|function) (\w+)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(mod).sort());
});

test("the members index.d.ts declares on each class exist in index.js", () => {
  for (const m of dts.matchAll(/^export declare class (\w+)[^{]*\{\n([\s\S]*?)^\}/gm)) {
    const [, name, body] = m;
    const C = mod[name];
    for (const mm of body.matchAll(/^ {2}(static )?(?:readonly )?(\w+)\??[(:]/gm)) {
      const [, isStatic, member] = mm;
      if (member === "constructor") continue;
      const has = isStatic ? member in C : member in C.prototype || fieldOf(name, member);
      assert.ok(has, `${name}.${member} is declared in index.d.ts but missing in index.js`);
    }
  }
});

/** Instance fields (set in the constructor) of the classes that have some. */
function fieldOf(cls, member) {
  const src = readFileSync(join(HERE, "index.js"), "utf8");
  const start = src.indexOf(`class ${cls} `);
  const body = src.slice(start, src.indexOf("\n}\n", start));
  return new RegExp(`this\\.${member} =`).test(body);
}

test("tsc: index.js against its JSDoc, index.d.ts in use", (t) => {
  const which = spawnSync("tsc", ["--version"], { encoding: "utf8" });
  if (which.status !== 0) {
    if (process.env.GATEBRIDGE_REQUIRE_TSC === "1") assert.fail("tsc is required (GATEBRIDGE_REQUIRE_TSC=1) but missing: apt-get install node-typescript");
    t.skip("no tsc: apt-get install node-typescript (make deps)");
    return;
  }
  const r = spawnSync("tsc", ["--noEmit", "-p", HERE], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test("a policy refusal (-32007) is a PolicyDeniedError with the server's data and hint", () => {
  const data = { kind: "policy_denied", decision: "deny", command: ["rm", "-rf", "build"], hint: "see policy check" };
  const e = mod.errorFor(mod.POLICY_DENIED, "policy: command rm -rf build denied by rule 0", data);
  assert.ok(e instanceof mod.PolicyDeniedError && e instanceof mod.GatebridgeError);
  assert.equal(e.code, -32007);
  assert.equal(e.hint, "see policy check");
  assert.deepEqual(e.data.command, ["rm", "-rf", "build"]);
});
