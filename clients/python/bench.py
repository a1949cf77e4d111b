#!/usr/bin/env python3
"""The protocol measured from Python, side by side in one run:

- one command: `true` run through a warm server (process/start to
  process/exited, local backend) against the client starting `true`
  itself (subprocess.run), alternating call by call: once with this
  client (threads: a reader, an events thread), once with a bare
  line-by-line loop over the protocol (the protocol's own cost);
- gate round trip from a sandboxed shell loop: a gate answered by this
  client (gate/call) against gb_echo, a Go gate built into the server,
  alternating batches.

    make build && GATEBRIDGE_BIN=bin/gatebridge python3 clients/python/bench.py [ROUNDS] [--gap MS]

With --gap MS, the one-command rows sleep MS milliseconds before each
timed spawn and each timed process/start, so that neither is timed while
the other's leftovers run (the server removing the last command's session
and opening the next spare, the client reaping its child). Without it
they run back to back, and the server's cleanup overlaps the client's own
spawn of `true`.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gatebridge_client import Client  # noqa: E402

BATCH = 20
WARM = 200  # untimed commands before each one-command row: "through a warm server"
GAP = 0.0  # seconds slept before each timed one-command step (--gap)


def raw_protocol(starts: int, ws: str) -> None:
    """process/start of true to process/exited over a bare pipe, no threads."""
    binary = os.environ.get("GATEBRIDGE_BIN", "gatebridge")
    # Buffered pipes: an unbuffered readline reads one byte per system
    # call, which would time the harness instead of the protocol.
    srv = subprocess.Popen([binary, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert srv.stdin is not None and srv.stdout is not None
    inp, out = srv.stdin, srv.stdout

    def send(i: int, method: str, params: dict) -> None:
        inp.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
        inp.flush()

    def until(pred) -> dict:
        while True:
            m = json.loads(out.readline())
            if pred(m):
                return m

    send(1, "initialize", {"clientName": "bench", "protocolVersion": 1})
    until(lambda m: m.get("id") == 1)
    send(2, "sandbox/open", {"sandboxId": "s", "backend": "local", "workspace": ws})
    until(lambda m: m.get("id") == 2)
    for i in range(WARM):  # a warm server: its heap grown, its spare session made
        send(100000 + i, "process/start", {"processId": "w%d" % i, "sandboxId": "s", "argv": ["true"]})
        until(lambda m: m.get("method") == "process/exited")
        subprocess.run(["true"], check=True)

    def start(i: int) -> None:
        send(10 + i, "process/start", {"processId": "p%d" % i, "sandboxId": "s", "argv": ["true"]})
        until(lambda m: m.get("method") == "process/exited")

    spawn, serve = interleaved(starts, start)
    inp.close()
    srv.wait()
    print("one command, local, %d each%s, bare protocol loop: through serve %.2f ms, subprocess.run %.2f ms, ratio %.2f"
          % (starts, gap_note(), serve / starts * 1e3, spawn / starts * 1e3, serve / spawn))


def interleaved(n: int, start: Callable[[int], None]) -> Tuple[float, float]:
    """n rounds, each after GAP: subprocess.run(["true"]), then start(i);
    the seconds each took in all, (spawn, serve)."""
    spawn = serve = 0.0
    for i in range(n):
        time.sleep(GAP)
        t0 = time.perf_counter()
        subprocess.run(["true"], check=True)
        spawn += time.perf_counter() - t0
        time.sleep(GAP)
        t1 = time.perf_counter()
        start(i)
        serve += time.perf_counter() - t1
    return spawn, serve


def gap_note() -> str:
    return ", gap %g ms" % (GAP * 1e3) if GAP else ", back to back"


def main() -> int:
    global GAP
    args = sys.argv[1:]
    if "--gap" in args:
        i = args.index("--gap")
        GAP = float(args[i + 1]) / 1e3
        del args[i:i + 2]
    rounds = int(args[0]) if args else 10
    loop = "i=0; while [ $i -lt %d ]; do %s x >/dev/null || exit 1; i=$((i+1)); done"
    times = {"python": 0.0, "go": 0.0}
    with Client() as client:
        client.register_gate("pygate", lambda call: "x\n")
        with tempfile.TemporaryDirectory() as ws, client.open_sandbox(backend="local", workspace=ws) as sb:
            for _ in range(WARM):  # the same warm-up as the bare loop's
                sb.run(["true"])
                subprocess.run(["true"], check=True)
            starts = rounds * BATCH

            def run_true(_: int) -> None:
                r = sb.run(["true"])
                if r.exit_code != 0:
                    raise SystemExit("true failed: %r" % r.stderr)  # exit 1, the message on stderr

            spawn, serve = interleaved(starts, run_true)
            print("one command, local, %d each%s, this client: through serve %.2f ms, subprocess.run %.2f ms, ratio %.2f"
                  % (starts, gap_note(), serve / starts * 1e3, spawn / starts * 1e3, serve / spawn))
            raw_protocol(starts, ws)
            for _ in range(rounds):
                for name, gate in (("python", "pygate"), ("go", "gb_echo")):
                    t0 = time.perf_counter()
                    r = sb.run(loop % (BATCH, gate))
                    times[name] += time.perf_counter() - t0
                    if r.exit_code != 0:
                        print("loop %s failed: %r" % (gate, r.stderr), file=sys.stderr)
                        return 1
    n = rounds * BATCH
    py, go = times["python"] / n * 1e3, times["go"] / n * 1e3
    print("gate round trip, local, %d calls each: python-answered %.2f ms, Go gate %.2f ms, ratio %.2f" % (n, py, go, py / go))
    return 0


if __name__ == "__main__":
    sys.exit(main())
