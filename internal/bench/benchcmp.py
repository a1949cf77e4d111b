#!/usr/bin/env python3
"""Compare benchmark runs of two gatebridge builds, side by side.

    python3 internal/bench/benchcmp.py [--base WORD] [--after WORD] FILE...

Each FILE is one run of one of:

- `gatebridge bench --sandbox S --json` output (a JSON object);
- `clients/python/bench.py` output (its "..., ratio X" lines);
- `go test -bench` output (Benchmark lines; -count N gives N samples).

A file belongs to the base build when its name contains WORD of --base
("base"), to the after build when it contains WORD of --after ("after").
Alternate the two builds on the same machine, and give each at least 3
runs: only figures measured together count (docs/performance.md).

For each row it prints the median of each side with its spread (max-min
of the samples) and after/base. A row FAILS when the after median is
worse than the worst base sample: slower than the slowest base run (or,
for a rate, below the lowest); the base spread is the noise. The exit
status is 1 when a row fails, 2 on bad input. With base files only, it
prints the base medians (a baseline).

Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import sys

# Rows from `gatebridge bench --json`: (label, path into the object,
# higher is better). The label gets the sandbox in front.
BENCH_ROWS = [
    ("round trip p50 ms", ("round_trip", "p50_ms"), False),
    ("round trip p99 ms", ("round_trip", "p99_ms"), False),
    ("wrapper alone p50 ms", ("wrapper_alone", "p50_ms"), False),
    ("host share p50 ms (round trip - wrapper alone)", None, False),
    ("floor p50 ms", ("floor", "p50_ms"), False),
    ("process start p50 ms", ("process_start", "p50_ms"), False),
    ("poll p50 ms", ("poll", "p50_ms"), False),
    ("parallel calls/s", ("parallel", "calls_per_sec"), True),
    ("slow gate wall/call ms", ("slow_gate", "wall_per_call_ms"), False),
    ("slow gate host CPU/call ms", ("slow_gate", "host_cpu_per_call_ms"), False),
    ("slow gate sandbox CPU/call ms", ("slow_gate", "sandbox_cpu_per_call_ms"), False),
    ("session: run -- true ms", ("session", "run_true_median_ms"), False),
    ("session: run / sh ratio", ("session", "ratio"), False),
    ("memory RSS first MB", ("memory", "rss_first_mb"), False),
    ("memory RSS last MB", ("memory", "rss_last_mb"), False),
]

# clients/python/bench.py: "one command, local, 400 each, back to back, this
# client: through serve 1.36 ms, subprocess.run 0.88 ms, ratio 1.55".
PY_LINE = re.compile(r"^(?P<what>[^:]+): (?P<detail>.*), ratio (?P<ratio>[0-9.]+)\s*$")
PY_MS = re.compile(r"([^,]+?) ([0-9.]+) ms")
PY_COUNT = re.compile(r",\s*\d+ (?:calls )?each")

# go test -bench: "BenchmarkX-2   300   12345 ns/op   12 B/op ...".
GO_LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$")
GO_METRIC = re.compile(r"([0-9.eE+-]+)\s+(\S+)")


class Table:
    def __init__(self):
        self.rows = {}  # label -> {"higher": bool, "base": [...], "after": [...]}
        self.order = []

    def add(self, label, side, value, higher=False):
        if value is None:
            return
        r = self.rows.get(label)
        if r is None:
            r = self.rows[label] = {"higher": higher, "base": [], "after": []}
            self.order.append(label)
        r[side].append(float(value))


def dig(obj, path):
    for k in path:
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj if isinstance(obj, (int, float)) else None


def read_bench_json(t, side, obj):
    sb = obj.get("sandbox", "?")
    for label, path, higher in BENCH_ROWS:
        if path is None:  # host share: derived
            rt, alone = dig(obj, ("round_trip", "p50_ms")), dig(obj, ("wrapper_alone", "p50_ms"))
            v = rt - alone if rt is not None and alone is not None else None
        else:
            v = dig(obj, path)
        t.add(f"bench {sb}: {label}", side, v, higher)


def kind_of(name, words):
    """The kind of run a file holds, from its name: "py-base-2.txt" and
    "py-after-1.txt" are both "py", "pygap-base-1.txt" is "pygap"."""
    k = os.path.splitext(os.path.basename(name))[0]
    for w in words:
        k = k.replace(w, "")
    return re.sub(r"[-_.]*\d*[-_.]*$", "", re.sub(r"[-_.]+\d+(?=[-_.]|$)", "", k)).strip("-_.") or "text"


def read_text(t, side, text, name, kind):
    found = 0
    for line in text.splitlines():
        m = GO_LINE.match(line)
        if m:
            bench, rest = m.group(1), m.group(2)
            for v, unit in GO_METRIC.findall(rest):
                try:
                    val = float(v)
                except ValueError:
                    continue
                t.add(f"{kind} {bench}: {unit}", side, val, unit.endswith("/s"))
                found += 1
            continue
        m = PY_LINE.match(line)
        if m:
            what = PY_COUNT.sub("", m.group("what")).strip()
            for item, ms in PY_MS.findall(m.group("detail")):
                t.add(f"{kind} {what}: {item.strip()} ms", side, ms)
            t.add(f"{kind} {what}: ratio", side, m.group("ratio"))
            found += 1
    if not found:
        raise ValueError(f"{name}: no bench.py or go test -bench lines")


def side_of(name, base, after):
    b = os.path.basename(name)
    if after in b:
        return "after"
    if base in b:
        return "base"
    return None


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def summary(xs):
    if not xs:
        return "", None
    med = statistics.median(xs)
    return f"{fmt(med)} ±{fmt(max(xs) - min(xs))} (n={len(xs)})", med


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="base", help="file-name word of the base build's runs (default: base)")
    ap.add_argument("--after", default="after", help="file-name word of the after build's runs (default: after)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    t = Table()
    for f in a.files:
        side = side_of(f, a.base, a.after)
        if side is None:
            print(f"benchcmp: {f}: its name holds neither {a.base!r} nor {a.after!r}", file=sys.stderr)
            return 2
        try:
            with open(f, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            s = text.lstrip()
            if s.startswith("{"):
                read_bench_json(t, side, json.loads(s))
            else:
                read_text(t, side, text, f, kind_of(f, (a.base, a.after)))
        except (OSError, ValueError) as e:
            print(f"benchcmp: {e}", file=sys.stderr)
            return 2
    have_after = any(r["after"] for r in t.rows.values())
    if have_after:
        print("| row | base median ±spread | after median ±spread | after/base | |")
        print("|---|---|---|---|---|")
    else:
        print("| row | base median ±spread |")
        print("|---|---|")
    failed = []
    for label in t.order:
        r = t.rows[label]
        bs, bmed = summary(r["base"])
        if not have_after:
            print(f"| {label} | {bs} |")
            continue
        as_, amed = summary(r["after"])
        ratio, verdict = "", ""
        if bmed is not None and amed is not None:
            ratio = f"{amed / bmed:.2f}" if bmed else ""
            worst = min(r["base"]) if r["higher"] else max(r["base"])
            worse = amed < worst if r["higher"] else amed > worst
            verdict = "FAIL" if worse else "ok"
            if worse:
                failed.append(label)
        print(f"| {label} | {bs} | {as_} | {ratio} | {verdict} |")
    if failed:
        print(f"\n{len(failed)} row(s) slower than the slowest base run: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
