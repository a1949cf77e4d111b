#!/usr/bin/env python3
"""The warm pool measured from Python, side by side in one run:

- a new sandbox's first command: the time from sandbox/open to the exit
  of `true`, its first command, through this client, with
  `serve --stdio --pool SIZE` (a started container taken from the pool)
  and without a pool (a container started at the open), against
  `docker run --rm --network none IMAGE true` in the same rounds. Each
  round runs the three in turn, after the pool is full again and every
  container of the last round is gone, so that no row is timed while
  another's leftovers (a refill, a removal) run. p50 and p99 in ms.
- a pool of SIZE: the containers it holds, their memory (the engine's
  `docker stats`) and serve's RSS, and its refill rate: SIZE containers
  started from empty (after the first open of a spec), per second.

    make build && GATEBRIDGE_BIN=bin/gatebridge python3 clients/python/bench_pool.py [ROUNDS] [--size N]

Needs a docker engine with IMAGE present (make test-image; env
GATEBRIDGE_BENCH_IMAGE, default gatebridge-test:latest). Without one it
says so and exits 0.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gatebridge_client import Client  # noqa: E402

IMAGE = os.environ.get("GATEBRIDGE_BENCH_IMAGE", "gatebridge-test:latest")


def owned(pid: int) -> list:
    """Ids of the containers the serve process pid owns."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.gatebridge.owned=true",
                          "--filter", "label=io.gatebridge.pid=%d" % pid],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def wait_owned(pid: int, n: int, what: str, limit: float = 120.0) -> float:
    """Waits until serve pid owns n containers; returns the seconds it took."""
    t0 = time.perf_counter()
    while len(owned(pid)) != n:
        if time.perf_counter() - t0 > limit:
            raise RuntimeError("%s: %d containers, want %d" % (what, len(owned(pid)), n))
        time.sleep(0.01)
    return time.perf_counter() - t0


def pct(xs: list, p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def mib(s: str) -> float:
    m = re.match(r"([\d.]+)\s*([KMG]i?B|B)", s.strip())
    if not m:
        return 0.0
    v, unit = float(m.group(1)), m.group(2)
    return v * {"B": 1 / 2**20, "KiB": 1 / 1024, "kB": 1 / 1024, "MiB": 1, "MB": 1, "GiB": 1024, "GB": 1024}.get(unit, 1)


def rss_mib(pid: int) -> float:
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    args = sys.argv[1:]
    size = 8
    if "--size" in args:
        i = args.index("--size")
        size = int(args[i + 1])
        del args[i:i + 2]
    rounds = int(args[0]) if args else 20
    if shutil.which("docker") is None or subprocess.run(["docker", "image", "inspect", IMAGE],
                                                         capture_output=True).returncode != 0:
        print("pool bench skipped: no docker engine with %s (make test-image)" % IMAGE)
        return 0
    binary = os.environ.get("GATEBRIDGE_BIN", "gatebridge")
    if os.sep in binary:
        binary = os.path.abspath(binary)  # the servers run in a directory of their own
    tmp = tempfile.mkdtemp()
    os.chmod(tmp, 0o755)
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws, 0o755)
    times = {"pool": [], "nopool": [], "docker": []}
    opens = {"pool": [], "nopool": []}  # sandbox/open alone
    try:
        with Client([binary, "serve", "--stdio", "--image", IMAGE, "--pool", str(size)], cwd=tmp) as pooled, \
                Client([binary, "serve", "--stdio", "--image", IMAGE], cwd=tmp) as plain:
            ppid, npid = pooled.pid, plain.pid
            rss0 = rss_mib(ppid)
            # The first open of a spec is a miss that tells the pool what to start.
            with pooled.open_sandbox(backend="docker", workspace=ws) as sb:
                sb.run(["true"])
            fill = wait_owned(ppid, size, "the pool's first fill")
            stats = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}"] + owned(ppid),
                                   capture_output=True, text=True, check=True).stdout.splitlines()
            mem = sum(mib(line.split("/")[0]) for line in stats)
            rss = rss_mib(ppid)
            with plain.open_sandbox(backend="docker", workspace=ws) as sb:  # warm-up
                sb.run(["true"])
            subprocess.run(["docker", "run", "--rm", "--network", "none", IMAGE, "true"], check=True)
            for i in range(rounds):
                for name, client, pid in (("pool", pooled, ppid), ("nopool", plain, npid), ("docker", None, 0)):
                    t0 = time.perf_counter()
                    if client is None:
                        subprocess.run(["docker", "run", "--rm", "--network", "none", IMAGE, "true"], check=True)
                        times[name].append(time.perf_counter() - t0)
                        continue
                    sb = client.open_sandbox(backend="docker", workspace=ws, sandbox_id="%s%d" % (name, i))
                    opens[name].append(time.perf_counter() - t0)
                    r = sb.run(["true"])
                    times[name].append(time.perf_counter() - t0)
                    if r.exit_code != 0:
                        print("true failed: %r" % r.stderr, file=sys.stderr)
                        return 1
                    sb.close()
                wait_owned(ppid, size, "the pool's refill")
                wait_owned(npid, 0, "the plain server's removal")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    d50 = pct(times["docker"], 50)
    print("new sandbox to first exit, docker %s, %d rounds (ms): p50 / p99" % (IMAGE, rounds))
    for name, label in (("pool", "serve --pool %d, sandbox/open + true" % size),
                        ("nopool", "serve, no pool, sandbox/open + true"),
                        ("docker", "docker run --rm IMAGE true")):
        p50, p99 = pct(times[name], 50) * 1e3, pct(times[name], 99) * 1e3
        of = " (sandbox/open alone p50 %.1f)" % (pct(opens[name], 50) * 1e3) if name in opens else ""
        print("  %-40s %7.1f / %7.1f   %.3fx docker run%s" % (label, p50, p99, pct(times[name], 50) / d50, of))
    print("pool of %d: %d containers, %.1f MiB in them (docker stats), serve RSS %.1f MiB (%.1f before the pool); "
          "fill from empty %.2f s: %.1f sandboxes/s" % (size, size, mem, rss, rss0, fill, size / fill))
    return 0


if __name__ == "__main__":
    sys.exit(main())
