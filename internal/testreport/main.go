// Command testreport runs a test command for `make test`, shows its
// output as the command would, and writes one part of the summary `make
// test` prints at its end: what ran, what was skipped and why.
//
//	go run ./internal/testreport go FILE -- go test -json ./...
//	go run ./internal/testreport unittest FILE -- python3 -m unittest discover -v
//	go run ./internal/testreport node FILE -- node --test --test-reporter=tap
//
// go reads `go test -json` events and prints what `go test` prints
// without -v (each package's result line, the output of failed tests and
// of failed packages, build errors), each package's line with its count
// of tests and skips; FILE gets the totals and, per package, each skip
// reason with the tests it skipped. unittest passes `unittest -v`'s
// output through and collects its "skipped 'reason'" lines the same way.
// node reads the TAP of `node --test --test-reporter=tap`, shows its
// result lines and the details of failures, and counts leaf tests (a
// skipped suite counts as one skip of "every test").
// The exit code is the command's (1 when it passed but a test failed).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 5 || os.Args[3] != "--" || !slices.Contains([]string{"go", "unittest", "node"}, os.Args[1]) {
		fmt.Fprintln(os.Stderr, "usage: testreport go|unittest|node FILE -- COMMAND [ARG...]")
		os.Exit(2)
	}
	kind, file, argv := os.Args[1], os.Args[2], os.Args[4:]
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = os.Stdin
	var r *report
	var out io.ReadCloser
	var err error
	if kind == "go" || kind == "node" {
		cmd.Stderr = os.Stderr
		out, err = cmd.StdoutPipe()
	} else {
		cmd.Stdout = os.Stdout // unittest reports on stderr
		out, err = cmd.StderrPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		os.Exit(1)
	}
	switch kind {
	case "go":
		r = readGo(out, os.Stdout)
	case "node":
		r = readNodeTAP(out, os.Stdout)
	default:
		r = readUnittest(out, os.Stderr)
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		}
		code = max(1, cmd.ProcessState.ExitCode())
	} else if r.failed > 0 {
		code = 1
	}
	if err := os.WriteFile(file, []byte(r.summary(strings.Join(argv, " "))), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// A report is what one command ran: counts, and per package (or test
// module) each skip reason with the tests it skipped.
type report struct {
	name                    string // "go test", "python unittest"
	packages, pkgFailed     int
	passed, failed, skipped int
	skips                   map[string]map[string][]string // package → reason → tests
}

func newReport(name string) *report {
	return &report{name: name, skips: map[string]map[string][]string{}}
}

func (r *report) skip(pkg, test, reason string) {
	r.skipped++
	if r.skips[pkg] == nil {
		r.skips[pkg] = map[string][]string{}
	}
	reason = strings.Join(strings.Fields(reason), " ")
	if reason == "" {
		reason = "(no reason given)"
	}
	if len(reason) > 200 {
		reason = reason[:200] + "…"
	}
	r.skips[pkg][reason] = append(r.skips[pkg][reason], test)
}

// summary is the report as `make test` prints it at the end.
func (r *report) summary(command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d passed, %d failed, %d skipped", r.name, r.passed, r.failed, r.skipped)
	if r.packages > 0 {
		fmt.Fprintf(&b, " in %d packages", r.packages)
		if r.pkgFailed > 0 {
			fmt.Fprintf(&b, " (%d failed)", r.pkgFailed)
		}
	}
	fmt.Fprintf(&b, "\n  ran: %s\n", command)
	pkgs := make([]string, 0, len(r.skips))
	for p := range r.skips {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		reasons := make([]string, 0, len(r.skips[p]))
		n := 0
		for why, tests := range r.skips[p] {
			reasons = append(reasons, why)
			n += len(tests)
		}
		// The reason that skipped most first.
		slices.SortFunc(reasons, func(a, b string) int {
			if d := len(r.skips[p][b]) - len(r.skips[p][a]); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		fmt.Fprintf(&b, "  skipped in %s (%d):\n", p, n)
		for _, why := range reasons {
			tests := r.skips[p][why]
			slices.Sort(tests)
			shown := strings.Join(tests[:min(3, len(tests))], ", ")
			if len(tests) > 3 {
				shown += fmt.Sprintf(", … %d more", len(tests)-3)
			}
			fmt.Fprintf(&b, "    %d× %s  [%s]\n", len(tests), why, shown)
		}
	}
	return b.String()
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Output     string
}

// goTest is one test of a go test -json stream.
type goTest struct {
	pkg, name, action string
	out               []string
}

// readGo reads go test -json events from in, prints what go test prints
// without -v to w, and counts leaf tests (a test with subtests counts
// through them).
func readGo(in io.Reader, w io.Writer) *report {
	r := newReport("go test")
	tests := map[string]*goTest{}   // pkg + " " + name
	parents := map[string]bool{}    // pkg + " " + name of a test with subtests
	pkgOut := map[string][]string{} // output outside any test
	var order []*goTest
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text()) // not an event: show it as it is
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Test != "":
			k := e.Package + " " + e.Test
			t := tests[k]
			if t == nil {
				t = &goTest{pkg: e.Package, name: e.Test}
				tests[k] = t
				order = append(order, t)
				for i := strings.LastIndex(e.Test, "/"); i > 0; i = strings.LastIndex(e.Test[:i], "/") {
					parents[e.Package+" "+e.Test[:i]] = true
				}
			}
			switch e.Action {
			case "output":
				t.out = append(t.out, e.Output)
			case "pass", "fail", "skip":
				t.action = e.Action
				if e.Action == "fail" {
					fmt.Fprint(w, strings.Join(t.out, ""))
				}
			}
		case e.Action == "output":
			pkgOut[e.Package] = append(pkgOut[e.Package], e.Output)
		case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
			r.packages++
			var passed, failed, skipped int
			rest := order[:0:0]
			for _, t := range order {
				if t.pkg != e.Package {
					rest = append(rest, t)
					continue
				}
				if parents[t.pkg+" "+t.name] {
					continue
				}
				switch t.action {
				case "pass":
					passed++
				case "fail", "": // "": still running when the package failed (a panic, a timeout)
					failed++
				case "skip":
					skipped++
					r.skip(shortPkg(t.pkg), t.name, skipReason(t.out))
				}
			}
			order = rest
			r.passed, r.failed = r.passed+passed, r.failed+failed
			last := ""
			for _, l := range pkgOut[e.Package] {
				if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "?   ") {
					last = strings.TrimRight(l, "\n")
				}
			}
			if e.Action == "fail" {
				r.pkgFailed++
				fmt.Fprint(w, strings.Join(nonResult(pkgOut[e.Package]), ""))
				last = cmpOr(last, "FAIL\t"+e.Package)
			}
			last = cmpOr(last, "ok  \t"+e.Package)
			if n := passed + failed + skipped; n > 0 {
				last += fmt.Sprintf("\t(tests: %d, skipped: %d)", n, skipped)
			}
			fmt.Fprintln(w, last)
			delete(pkgOut, e.Package)
		}
	}
	return r
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// nonResult is a package's own output but the lines go test's result
// line repeats.
func nonResult(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l == "PASS\n" || l == "FAIL\n" || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL\t") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// shortPkg is a package path without the module's.
func shortPkg(p string) string {
	if i := strings.Index(p, "/gatebridge/gatebridge/"); i >= 0 {
		return p[i+len("/gatebridge/gatebridge/"):]
	}
	return p
}

var logPrefix = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is what a skipped test logged, without go test's framing.
func skipReason(out []string) string {
	var parts []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		parts = append(parts, logPrefix.ReplaceAllString(l, ""))
	}
	return strings.Join(parts, " ")
}

// unittest -v names a test "test_x (module.Class.test_x)" (a class
// whose setUpClass skipped: "setUpClass (module.Class)"), then, on that
// line or a later one (after the first line of its docstring, or what
// it printed), " ... RESULT".
var (
	utHead   = regexp.MustCompile(`^(\w+) \(([\w.]+)\)`)
	utResult = regexp.MustCompile(`(?:^|\.\.\. )(ok|FAIL|ERROR|skipped '(.*)'|expected failure|unexpected success)$`)
)

// readUnittest copies in to w and collects the results of unittest -v.
func readUnittest(in io.Reader, w io.Writer) *report {
	r := newReport("python unittest")
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var test, mod string
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if m := utHead.FindStringSubmatch(line); m != nil {
			test, mod = m[1], m[2]
		}
		m := utResult.FindStringSubmatch(line)
		if m == nil || test == "" {
			continue
		}
		// module.Class.test_x → module, Class.test_x; module.Class → module, Class (every test)
		name := strings.TrimSuffix(mod, "."+test)
		module, class, _ := strings.Cut(name, ".")
		if test == "setUpClass" || test == "setUpModule" {
			test = "every test"
		}
		if class != "" {
			test = class + "." + test
		}
		switch res := m[1]; {
		case res == "ok" || res == "expected failure":
			r.passed++
		case strings.HasPrefix(res, "skipped"):
			r.skip(module, test, m[2])
		default:
			r.failed++
		}
		test = ""
	}
	return r
}

// node --test's TAP: "# Subtest: NAME" opens a test (indented four
// spaces per level), "ok N - NAME # SKIP reason" or "not ok N - NAME"
// closes it, and a YAML block between "---" and "..." follows.
var (
	tapSubtest = regexp.MustCompile(`^(\s*)# Subtest: (.*)$`)
	tapResult  = regexp.MustCompile(`^(\s*)(ok|not ok) \d+ - (.*?)(?: # (SKIP|TODO)(?: (.*))?)?$`)
)

// readNodeTAP shows the result lines of in and the YAML blocks of failed
// tests on w, and counts leaf tests; skips are grouped by the top-level
// test or suite.
func readNodeTAP(in io.Reader, w io.Writer) *report {
	r := newReport("node --test")
	type open struct {
		name     string
		children bool
	}
	var stack []*open
	showYAML := false // inside the YAML block of a failed test
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if showYAML {
			fmt.Fprintln(w, line)
			showYAML = trim != "..."
			continue
		}
		if m := tapSubtest.FindStringSubmatch(line); m != nil {
			if len(stack) > 0 {
				stack[len(stack)-1].children = true
			}
			stack = append(stack, &open{name: m[2]})
			continue
		}
		m := tapResult.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "# ") || (trim != "" && !strings.HasPrefix(line, " ") && trim != "TAP version 13" && !strings.HasPrefix(trim, "1..")) {
				fmt.Fprintln(w, line) // the totals, and anything that is not TAP
			}
			continue
		}
		fmt.Fprintln(w, line)
		var t *open
		path := make([]string, 0, len(stack))
		for _, o := range stack {
			path = append(path, o.name)
		}
		if len(stack) > 0 {
			t, stack = stack[len(stack)-1], stack[:len(stack)-1]
		} else {
			t, path = &open{name: m[3]}, []string{m[3]}
		}
		group, name := path[0], strings.Join(path[1:], " > ")
		switch {
		case m[2] == "not ok":
			showYAML = true
			if !t.children {
				r.failed++
			}
		case m[4] == "SKIP" && !t.children:
			if name == "" {
				name = "every test"
			}
			r.skip(group, name, m[5])
		case !t.children:
			r.passed++
		}
	}
	return r
}
