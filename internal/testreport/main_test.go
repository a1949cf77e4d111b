package main

import (
	"strings"
	"testing"
)

const goJSON = `{"Action":"start","Package":"example.com/gatebridge/gatebridge/a"}
{"Action":"run","Package":"example.com/gatebridge/gatebridge/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"example.com/gatebridge/gatebridge/a","Test":"TestOK"}
{"Action":"run","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends"}
{"Action":"run","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/bwrap"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/bwrap","Output":"    a_test.go:12: bwrap cannot run here:\n"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/bwrap","Output":"    a_test.go:12:   no user namespaces\n"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/bwrap","Output":"--- SKIP: TestBackends/bwrap (0.00s)\n"}
{"Action":"skip","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/bwrap"}
{"Action":"run","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/local"}
{"Action":"pass","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends/local"}
{"Action":"pass","Package":"example.com/gatebridge/gatebridge/a","Test":"TestBackends"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/a","Output":"PASS\n"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/a","Output":"ok  \texample.com/gatebridge/gatebridge/a\t0.01s\n"}
{"Action":"pass","Package":"example.com/gatebridge/gatebridge/a"}
{"Action":"run","Package":"example.com/gatebridge/gatebridge/b","Test":"TestBad"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/b","Test":"TestBad","Output":"    b_test.go:3: got 1, want 2\n"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"example.com/gatebridge/gatebridge/b","Test":"TestBad"}
{"Action":"run","Package":"example.com/gatebridge/gatebridge/b","Test":"TestHangs"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/b","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"example.com/gatebridge/gatebridge/b","Output":"FAIL\texample.com/gatebridge/gatebridge/b\t1.00s\n"}
{"Action":"fail","Package":"example.com/gatebridge/gatebridge/b"}
{"ImportPath":"example.com/gatebridge/gatebridge/c","Action":"build-output","Output":"c/c.go:1:1: syntax error\n"}
not json at all
`

func TestReadGo(t *testing.T) {
	var out strings.Builder
	r := readGo(strings.NewReader(goJSON), &out)
	// What go test without -v shows: result lines, failures in full.
	for _, want := range []string{
		"ok  \texample.com/gatebridge/gatebridge/a\t0.01s\t(tests: 3, skipped: 1)\n",
		"    b_test.go:3: got 1, want 2\n--- FAIL: TestBad (0.00s)\n",
		"panic: test timed out after 1s\nFAIL\texample.com/gatebridge/gatebridge/b\t1.00s\t(tests: 2, skipped: 0)\n",
		"c/c.go:1:1: syntax error\n",
		"not json at all\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "=== RUN") || strings.Contains(out.String(), "bwrap cannot run") {
		t.Errorf("output shows what passed or skipped:\n%s", out.String())
	}
	// Leaf tests: TestBackends counts through its subtests; TestHangs
	// never ended: failed.
	if r.passed != 2 || r.failed != 2 || r.skipped != 1 || r.packages != 2 || r.pkgFailed != 1 {
		t.Errorf("counts %+v", r)
	}
	sum := r.summary("go test ./...")
	want := "go test: 2 passed, 2 failed, 1 skipped in 2 packages (1 failed)\n  ran: go test ./...\n" +
		"  skipped in a (1):\n    1× bwrap cannot run here: no user namespaces  [TestBackends/bwrap]\n"
	if sum != want {
		t.Errorf("summary\n%s\nwant\n%s", sum, want)
	}
}

const unittestOut = `setUpClass (test_client.BwrapTests) ... skipped 'bwrap tests are off: set GATEBRIDGE_TEST_BWRAP=1'
test_a (test_client.LocalTests.test_a) ... ok
test_b (test_client.LocalTests.test_b)
First line of its docstring ... ok
test_c (test_client.LocalTests.test_c) ... printed by the test
FAIL
test_d (test_install.PipTests.test_d) ... skipped 'no pip'
test_e (test_install.PipTests.test_e) ... skipped 'no pip'

----------------------------------------------------------------------
Ran 5 tests in 1.0s

FAILED (failures=1, skipped=3)
`

func TestReadUnittest(t *testing.T) {
	var out strings.Builder
	r := readUnittest(strings.NewReader(unittestOut), &out)
	if out.String() != unittestOut {
		t.Errorf("output not passed through:\n%s", out.String())
	}
	if r.passed != 2 || r.failed != 1 || r.skipped != 3 {
		t.Errorf("counts %+v", r)
	}
	sum := r.summary("python3 -m unittest")
	for _, want := range []string{
		"python unittest: 2 passed, 1 failed, 3 skipped\n",
		"  skipped in test_client (1):\n    1× bwrap tests are off: set GATEBRIDGE_TEST_BWRAP=1  [BwrapTests.every test]\n",
		"  skipped in test_install (2):\n    2× no pip  [PipTests.test_d, PipTests.test_e]\n",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

const nodeTAP = `TAP version 13
# Subtest: local
    # Subtest: runs a command
    ok 1 - runs a command
      ---
      duration_ms: 14.7
      ...
    # Subtest: a gate
    not ok 2 - a gate
      ---
      error: 'Expected values to be strictly equal'
      ...
    1..2
not ok 1 - local
  ---
  type: 'suite'
  ...
# Subtest: bwrap
ok 2 - bwrap # SKIP bwrap tests are off: set GATEBRIDGE_TEST_BWRAP=1
  ---
  type: 'suite'
  ...
# Subtest: tsc
ok 3 - tsc # SKIP no tsc
  ---
  duration_ms: 0.1
  ...
# Subtest: plain
ok 4 - plain
  ---
  duration_ms: 0.1
  ...
1..4
# tests 4
# pass 2
`

func TestReadNodeTAP(t *testing.T) {
	var out strings.Builder
	r := readNodeTAP(strings.NewReader(nodeTAP), &out)
	for _, want := range []string{"    ok 1 - runs a command\n", "    not ok 2 - a gate\n      ---\n      error: 'Expected values to be strictly equal'\n      ...\n", "# tests 4\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "duration_ms") {
		t.Errorf("output shows the YAML of tests that passed:\n%s", out.String())
	}
	// The suite local counts through its tests; the skipped suite bwrap is one skip.
	if r.passed != 2 || r.failed != 1 || r.skipped != 2 {
		t.Errorf("counts %+v", r)
	}
	sum := r.summary("node --test")
	for _, want := range []string{
		"node --test: 2 passed, 1 failed, 2 skipped\n",
		"  skipped in bwrap (1):\n    1× bwrap tests are off: set GATEBRIDGE_TEST_BWRAP=1  [every test]\n",
		"  skipped in tsc (1):\n    1× no tsc  [every test]\n",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}
