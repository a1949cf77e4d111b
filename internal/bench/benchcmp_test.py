"""Tests of benchcmp.py: python3 -m unittest discover -s scripts -p '*_test.py'."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchcmp  # noqa: E402

PY = ("one command, local, 400 each, back to back, this client: through serve {} ms, subprocess.run 0.88 ms, ratio {}\n"
      "gate round trip, local, 400 calls each: python-answered 1.48 ms, Go gate 1.27 ms, ratio 1.16\n")


def bench(p50, rate):
    return json.dumps({"sandbox": "local", "round_trip": {"p50_ms": p50, "p99_ms": 2},
                       "wrapper_alone": {"p50_ms": 1.0}, "parallel": {"calls_per_sec": rate}})


class BenchcmpTest(unittest.TestCase):
    def run_cmp(self, files):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, text in files.items():
                p = os.path.join(d, name)
                with open(p, "w") as f:
                    f.write(text)
                paths.append(p)
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                rc = benchcmp.main(paths)
            return rc, out.getvalue()

    def row(self, out, label):
        for line in out.splitlines():
            if line.startswith("| " + label + " |"):
                return line
        self.fail(f"no row {label!r} in:\n{out}")

    def test_within_noise_passes(self):
        rc, out = self.run_cmp({
            "bench-base-local-1.json": bench(1.4, 1000), "bench-base-local-2.json": bench(1.6, 1200),
            "bench-base-local-3.json": bench(1.5, 1100),
            "bench-after-local-1.json": bench(1.55, 1050), "bench-after-local-2.json": bench(1.5, 1150),
            "bench-after-local-3.json": bench(1.6, 1000),
        })
        self.assertEqual(rc, 0, out)
        self.assertIn("| 1.5 ±0.2 (n=3) | 1.55 ±0.1 (n=3) | 1.03 | ok |", self.row(out, "bench local: round trip p50 ms"))
        self.assertIn("| 0.5 ±0.2", self.row(out, "bench local: host share p50 ms (round trip - wrapper alone)"))

    def test_slower_than_slowest_base_fails(self):
        rc, out = self.run_cmp({
            "bench-base-local-1.json": bench(1.4, 1000), "bench-base-local-2.json": bench(1.6, 1200),
            "bench-after-local-1.json": bench(1.7, 900), "bench-after-local-2.json": bench(1.8, 950),
        })
        self.assertEqual(rc, 1, out)
        self.assertTrue(self.row(out, "bench local: round trip p50 ms").endswith("| FAIL |"))
        # a rate fails when it falls below the lowest base run
        self.assertTrue(self.row(out, "bench local: parallel calls/s").endswith("| FAIL |"))

    def test_python_and_go_text(self):
        gob = "BenchmarkProcessStart-2   300   1200000 ns/op   12 allocs/op\nBenchmarkProcessStart-2   300   1300000 ns/op   12 allocs/op\n"
        rc, out = self.run_cmp({
            "py-base-1.txt": PY.format(1.3, 1.5), "py-base-2.txt": PY.format(1.4, 1.6),
            "py-after-1.txt": PY.format(1.35, 1.55), "pygap-base-1.txt": PY.format(3.0, 2.0),
            "gobench-base.txt": gob, "gobench-after.txt": gob.replace("1300000", "1900000"),
        })
        self.assertEqual(rc, 1, out)  # the Go median 1.55 ms is over the slowest base run (1.3 ms)
        self.assertIn("| 1.55 ±0.1 (n=2) | 1.55 ±0 (n=1) | 1.00 | ok |",
                      self.row(out, "py one command, local, back to back, this client: ratio"))
        self.row(out, "py one command, local, back to back, this client: through serve ms")
        self.row(out, "py gate round trip, local: python-answered ms")
        self.row(out, "pygap one command, local, back to back, this client: ratio")  # a kind of its own
        self.assertTrue(self.row(out, "gobench BenchmarkProcessStart: ns/op").endswith("| FAIL |"))

    def test_baseline_only_and_bad_input(self):
        rc, out = self.run_cmp({"bench-base-local-1.json": bench(1.4, 1000)})
        self.assertEqual(rc, 0)
        self.assertEqual(self.row(out, "bench local: round trip p50 ms"), "| bench local: round trip p50 ms | 1.4 ±0 (n=1) |")
        self.assertEqual(self.run_cmp({"other.json": bench(1, 1)})[0], 2)
        self.assertEqual(self.run_cmp({"notes-base.txt": "nothing here\n"})[0], 2)


if __name__ == "__main__":
    unittest.main()
