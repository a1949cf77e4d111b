#!/usr/bin/env python3
"""An agent loop on gatebridge: a (scripted) model drives a sandboxed shell.

A real runtime would send the model the tool descriptions and each
command's result, and get the next command back. Here the "model" is a
script, so this runs anywhere with no network and no API key, but
everything around it is real: the commands run in a gatebridge sandbox, and
the gates they call are answered by this Python process:

  lookup WORD      a runtime-defined gate (the runtime's knowledge base)
  ask_user Q       a runtime-defined gate (the user, answered from a script
                   here; --interactive asks you on the terminal)
  deploy TARGET    a gate that needs approval: the approval callback
                   allows "staging" and denies "production"
  read_file, list_dir, search   gatebridge's built-in file gates (the
                   workspace, read-only: the repository)

Usage, from the top of a clone:

    make build
    python3 examples/agent_loop.py                    # --sandbox auto
    python3 examples/agent_loop.py --sandbox bwrap    # or docker, local
    python3 examples/agent_loop.py --interactive      # you answer ask_user and approvals

The server is $GATEBRIDGE_BIN, else bin/gatebridge of this repository,
else gatebridge from PATH. With --sandbox auto and neither bubblewrap nor
Docker usable, the example says so and runs with --sandbox local (no
isolation: the scripted commands are trusted). It exits 0 when the loop
ran to its end.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

from gatebridge_client import (  # noqa: E402
    UNAVAILABLE,
    ApprovalRequest,
    Client,
    GateCall,
    GatebridgeError,
    RunResult,
)

# ---------------------------------------------------------------- the "model"


class ScriptedModel:
    """Stands in for an LLM: given the conversation so far, returns the
    next shell command, or None with a final answer. It reads earlier
    results like a model would (the user's answer picks the next step)."""

    def __init__(self) -> None:
        self.final_answer = ""

    def next_command(self, history: List[Tuple[str, RunResult]]) -> Optional[str]:
        step = len(history)
        if step == 0:
            return "list_dir | head -5"
        if step == 1:
            return "lookup gate; lookup mailbox"
        if step == 2:
            return 'answer=$(ask_user "Which file should I summarize?") && echo "user chose: $answer"'
        if step == 3:
            chosen = history[-1][1].stdout_text.strip().split(": ", 1)[-1] or "README.md"
            return "read_file %s | head -3 | cut -c1-72; echo; search 'func main' | wc -l | sed 's/^ */main functions: /'" % chosen
        if step == 4:
            return "deploy staging && deploy production; echo \"deploy exit code: $?\""
        self.final_answer = ("Listed the workspace, looked up two terms, asked the user, read the file "
                             "they chose, deployed to staging; production was refused.")
        return None


# ---------------------------------------------------------------- the runtime

GLOSSARY = {
    "gate": "a host-side tool that appears as a command inside the sandbox",
    "mailbox": "the directory through which the sandbox calls gates: files, no sockets",
    "sandbox": "where the model's commands run: bubblewrap, Docker, or a plain process",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "docker", "local"])
    ap.add_argument("--interactive", action="store_true", help="answer ask_user and approvals yourself")
    opts = ap.parse_args()
    interactive = opts.interactive and sys.stdin.isatty()

    binary = os.environ.get("GATEBRIDGE_BIN") or os.path.join(ROOT, "bin", "gatebridge")
    if not os.path.exists(binary):
        binary = "gatebridge"
    print_lock = threading.Lock()

    def say(who: str, text: str) -> None:
        with print_lock:
            for line in text.rstrip("\n").split("\n"):
                print("%-9s %s" % (who, line), flush=True)

    def on_approval(req: ApprovalRequest) -> Any:
        # Arguments come from the sandbox: show them quoted (repr escapes
        # newlines, terminal escapes and bytes that are not UTF-8), so the
        # person approving sees what the gate would get (docs/json.md).
        prompt = "%s %s" % (req.gate, " ".join(repr(a) for a in req.args))
        if interactive:
            with print_lock:
                ans = input("approve `%s`? [y/N/s(ession)] " % prompt).strip().lower()
            decision = {"y": "allow", "s": "allowForSession"}.get(ans, "deny")
        else:
            decision = "deny" if "production" in req.args else "allow"
        say("approval", "`%s` -> %s" % (prompt, decision))
        return (decision, "production deploys need a human") if decision == "deny" else decision

    with Client([binary, "serve", "--stdio"], on_approval=on_approval) as client:
        say("runtime", "gatebridge %s, protocol %d" % (client.server_version, client.protocol_version))

        @client.gate("lookup", summary="Look a term up in the runtime's glossary", usage="lookup TERM",
                     params=[{"name": "TERM", "description": "a word", "required": True}])
        def lookup(call: GateCall) -> Any:
            if len(call.args) != 1:
                return (2, None, "usage: lookup TERM\n")
            term = call.args[0].lower()
            if term not in GLOSSARY:
                return (1, None, "lookup: no entry for %r\n" % term)
            return "%s: %s\n" % (term, GLOSSARY[term])

        @client.gate("ask_user", summary="Ask the user a question; prints the answer", usage="ask_user QUESTION")
        def ask_user(call: GateCall) -> Any:
            question = " ".join(call.args)
            if interactive:
                with print_lock:
                    answer = input("the model asks: %s " % question)
            else:
                answer = "README.md"
                say("user", "asked %r, answers %r" % (question, answer))
            return answer + "\n"

        @client.gate("deploy", summary="Deploy the project (asks for approval)", usage="deploy TARGET", approval=True)
        def deploy(call: GateCall) -> Any:
            call.write_stdout("deploying to %s...\n" % call.args[0])  # streamed to the caller at once
            return "deployed to %s\n" % call.args[0]

        try:
            sb = client.open_sandbox(backend=opts.sandbox, workspace=ROOT)
        except GatebridgeError as e:
            if opts.sandbox != "auto" or e.code != UNAVAILABLE:
                raise
            say("runtime", "%s;" % e.message)
            say("runtime", "running this trusted example with --sandbox local (UNSANDBOXED)")
            sb = client.open_sandbox(backend="local", workspace=ROOT)
        say("runtime", "sandbox %s: backend %s (%s), workspace %s" % (sb.id, sb.backend, sb.reason, sb.workspace_inside))

        tools = client.list_gates()
        say("runtime", "tools for the model: " + ", ".join(t["usage"] for t in tools if t["name"] != "gb_echo"))

        model = ScriptedModel()
        history: List[Tuple[str, RunResult]] = []
        while True:
            cmd = model.next_command(history)
            if cmd is None:
                break
            say("model", "$ " + cmd)

            def show(stream: str, data: bytes) -> None:
                say("  " + stream, data.decode("utf-8", "replace"))

            result = sb.run(cmd, timeout=30, on_output=show)  # seconds; a str runs under sh -c
            say("  exit", str(result.exit_code))
            history.append((cmd, result))
        say("model", "final answer: " + model.final_answer)
        sb.close()

    if interactive:
        return 0
    ok: Dict[str, bool] = {
        "lookup answered": b"gate: a host-side tool" in history[1][1].stdout,
        "user answered": history[2][1].stdout == b"user chose: README.md\n",
        "staging deployed": b"deployed to staging" in history[4][1].stdout,
        "production refused": b"deploy exit code: 126" in history[4][1].stdout,
    }
    for what, good in ok.items():
        say("check", "%s: %s" % (what, "ok" if good else "FAILED"))
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
