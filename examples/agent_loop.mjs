#!/usr/bin/env node
// An agent loop on gatebridge, in JavaScript: a (scripted) model drives a
// sandboxed shell. The same loop as examples/agent_loop.py, with the
// TypeScript/JavaScript client (clients/typescript).
//
// A real runtime would send the model the tool descriptions and each
// command's result, and get the next command back. Here the "model" is a
// script, so this runs anywhere with no network and no API key, but
// everything around it is real: the commands run in a gatebridge sandbox,
// and the gates they call are answered by this Node process:
//
//   lookup WORD      a runtime-defined gate (the runtime's knowledge base)
//   ask_user Q       a runtime-defined gate (the user, answered from a
//                    script here)
//   deploy TARGET    a gate that needs approval: the approval handler
//                    allows "staging" and denies "production"
//   read_file, list_dir, search   gatebridge's built-in file gates (the
//                    workspace, read-only: the repository)
//
// Usage, from the top of a clone:
//
//   make build
//   node examples/agent_loop.mjs                    # --sandbox auto
//   node examples/agent_loop.mjs --sandbox bwrap    # or docker, local
//
// The server is $GATEBRIDGE_BIN, else bin/gatebridge of this repository,
// else gatebridge from PATH. With --sandbox auto and neither bubblewrap
// nor Docker usable, it says so and runs with --sandbox local (no
// isolation: the scripted commands are trusted). It exits 0 when the loop
// ran to its end.

import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Client, UnavailableError } from "../clients/typescript/index.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Stands in for an LLM: given the conversation so far, the next shell
 * command, or null with a final answer. */
class ScriptedModel {
  finalAnswer = "";

  nextCommand(history) {
    switch (history.length) {
      case 0: return "list_dir | head -5";
      case 1: return "lookup gate; lookup mailbox";
      case 2: return 'answer=$(ask_user "Which file should I summarize?") && echo "user chose: $answer"';
      case 3: {
        const chosen = history[2].result.stdoutText.trim().split(": ").at(-1) || "README.md";
        return `read_file ${chosen} | head -3 | cut -c1-72; echo; search 'func main' | wc -l | sed 's/^ */main functions: /'`;
      }
      case 4: return 'deploy staging && deploy production; echo "deploy exit code: $?"';
      default:
        this.finalAnswer = "Listed the workspace, looked up two terms, asked the user, read the file " +
          "they chose, deployed to staging; production was refused.";
        return null;
    }
  }
}

const GLOSSARY = {
  gate: "a host-side tool that appears as a command inside the sandbox",
  mailbox: "the directory through which the sandbox calls gates: files, no sockets",
  sandbox: "where the model's commands run: bubblewrap, Docker, or a plain process",
};

function say(who, text) {
  for (const line of text.replace(/\n$/, "").split("\n")) console.log(`${who.padEnd(9)} ${line}`);
}

async function main() {
  const i = process.argv.indexOf("--sandbox");
  const backend = i > 0 ? process.argv[i + 1] : "auto";
  let binary = process.env.GATEBRIDGE_BIN || join(ROOT, "bin", "gatebridge");
  if (!existsSync(binary)) binary = "gatebridge";

  const client = await Client.start({
    argv: [binary, "serve", "--stdio"],
    onApproval: async (req) => {
      // Arguments come from the sandbox: show them quoted (JSON escapes
      // newlines and terminal escapes), so the person approving sees what
      // the gate would get.
      const prompt = `${req.gate} ${req.args.map((a) => JSON.stringify(a)).join(" ")}`;
      const decision = req.args.includes("production") ? "deny" : "allow";
      say("approval", `\`${prompt}\` -> ${decision}`);
      return decision === "deny" ? [decision, "production deploys need a human"] : decision;
    },
  });
  const history = [];
  const model = new ScriptedModel();
  try {
    say("runtime", `gatebridge ${client.serverVersion}, protocol ${client.protocolVersion}`);

    await client.registerGate("lookup", async (call) => {
      if (call.args.length !== 1) return [2, null, "usage: lookup TERM\n"];
      const term = call.args[0].toLowerCase();
      if (!Object.hasOwn(GLOSSARY, term)) return [1, null, `lookup: no entry for ${JSON.stringify(term)}\n`];
      return `${term}: ${GLOSSARY[term]}\n`;
    }, {
      summary: "Look a term up in the runtime's glossary", usage: "lookup TERM",
      params: [{ name: "TERM", description: "a word", required: true }],
    });

    await client.registerGate("ask_user", async (call) => {
      const question = call.args.join(" ");
      const answer = "README.md";
      say("user", `asked ${JSON.stringify(question)}, answers ${JSON.stringify(answer)}`);
      return answer + "\n";
    }, { summary: "Ask the user a question; prints the answer", usage: "ask_user QUESTION" });

    await client.registerGate("deploy", async (call) => {
      call.writeStdout(`deploying to ${call.args[0]}...\n`); // streamed to the caller at once
      return `deployed to ${call.args[0]}\n`;
    }, { summary: "Deploy the project (asks for approval)", usage: "deploy TARGET", approval: true });

    let sb;
    try {
      sb = await client.openSandbox({ backend, workspace: ROOT });
    } catch (e) {
      if (backend !== "auto" || !(e instanceof UnavailableError)) throw e;
      say("runtime", `${e.message};`);
      say("runtime", "running this trusted example with --sandbox local (UNSANDBOXED)");
      sb = await client.openSandbox({ backend: "local", workspace: ROOT });
    }
    say("runtime", `sandbox ${sb.id}: backend ${sb.backend} (${sb.reason}), workspace ${sb.workspaceInside}`);

    const tools = await client.listGates();
    say("runtime", "tools for the model: " + tools.filter((t) => t.name !== "gb_echo").map((t) => t.usage).join(", "));

    for (;;) {
      const cmd = model.nextCommand(history);
      if (cmd == null) break;
      say("model", "$ " + cmd);
      const result = await sb.run(cmd, {
        timeout: 30, // seconds
        onOutput: (stream, data) => say("  " + stream, Buffer.from(data).toString("utf8")),
      });
      say("  exit", String(result.exitCode));
      history.push({ cmd, result });
    }
    say("model", "final answer: " + model.finalAnswer);
    await sb.close();
  } finally {
    await client.close();
  }

  const checks = {
    "lookup answered": history[1].result.stdoutText.includes("gate: a host-side tool"),
    "user answered": history[2].result.stdoutText === "user chose: README.md\n",
    "staging deployed": history[4].result.stdoutText.includes("deployed to staging"),
    "production refused": history[4].result.stdoutText.includes("deploy exit code: 126"),
  };
  for (const [what, good] of Object.entries(checks)) say("check", `${what}: ${good ? "ok" : "FAILED"}`);
  return Object.values(checks).every(Boolean) ? 0 : 1;
}

process.exitCode = await main();
