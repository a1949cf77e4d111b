package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// maxCmdLines is the cap: cmd/gatebridge holds flags, config and
// printing, under this many non-test lines (issue 27). It is permanent:
// no allow file can raise it; a new command's logic goes into a package.
const maxCmdLines = 2500

// cmdDir is the command the line budget applies to.
const cmdDir = "cmd/gatebridge"

// goosList are the systems gatebridge builds for (make lint builds
// darwin too): a rule holds for the imports of each.
var goosList = []string{"linux", "darwin"}

// An edge is one non-test import. Paths inside the module are relative
// to it ("bridge/rpc"); others are as imported ("golang.org/x/sys/unix").
type edge struct {
	from, to string
	toMod    bool // to is a package of this module
}

func (e edge) String() string { return "import " + e.from + " -> " + e.to }

// under reports whether package p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func underAny(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return under(p, d) })
}

// concrete are the packages only cmd/gatebridge wires in.
var concrete = []string{"sandbox/local", "sandbox/bwrap", "sandbox/docker", "sandbox/agent", "gates/mcptools"}

// backends are the concrete sandbox backends: they may import each other
// (docker runs the agent in its persistent sandboxes).
var backends = []string{"sandbox/local", "sandbox/bwrap", "sandbox/docker", "sandbox/agent"}

// leaves are the internal packages every layer may use: they import no
// other layer.
var leaves = []string{"internal/hint", "internal/fspath", "internal/lossless", "internal/hostilefs"}

// frontEnds and control are where issue 27 puts the adapters and the
// control plane; a rule about a package that does not exist yet holds
// trivially until it does.
var (
	frontEnds = []string{"bridge/rpc", "bridge/mcpserver"}
	control   = "bridge/control"
)

// frontEndOf is the front end package p is (or is below); "" for none.
func frontEndOf(p string) string {
	for _, f := range frontEnds {
		if under(p, f) {
			return f
		}
	}
	return ""
}

// A rule is one import rule: bad reports whether e breaks it.
type rule struct {
	name string
	bad  func(e edge) bool
}

var rules = []rule{
	{"only cmd/gatebridge imports a concrete backend (sandbox/{local,bwrap,docker,agent}) or gates/mcptools", func(e edge) bool {
		if !e.toMod || !underAny(e.to, concrete) || e.from == cmdDir {
			return false
		}
		for _, c := range concrete {
			if under(e.to, c) && under(e.from, c) {
				return false // its own subpackage
			}
		}
		return !(underAny(e.to, backends) && underAny(e.from, backends))
	}},
	{"the control plane imports no sandbox/* subpackage and no front end", func(e edge) bool {
		return under(e.from, control) && e.toMod && (strings.HasPrefix(e.to, "sandbox/") || underAny(e.to, frontEnds))
	}},
	{"the front ends import no sandbox/* subpackage and not bridge/mailbox", func(e edge) bool {
		return underAny(e.from, frontEnds) && e.toMod && (strings.HasPrefix(e.to, "sandbox/") || under(e.to, "bridge/mailbox"))
	}},
	{"a front end imports no other front end (bridge/mcpserver calls bridge/control, not bridge/rpc)", func(e edge) bool {
		from, to := frontEndOf(e.from), frontEndOf(e.to)
		return e.toMod && from != "" && to != "" && from != to
	}},
	{"bridge/mailbox (the wire format) imports nothing from the module and not golang.org/x/sys", func(e edge) bool {
		return under(e.from, "bridge/mailbox") && (e.toMod && !under(e.to, "bridge/mailbox") || under(e.to, "golang.org/x/sys"))
	}},
	{"sandbox and its backends import neither bridge/... nor gates/... (sandbox/sandboxtest may)", func(e edge) bool {
		return under(e.from, "sandbox") && !under(e.from, "sandbox/sandboxtest") && e.toMod &&
			(under(e.to, "bridge") || under(e.to, "gates"))
	}},
	{"gates/... does not import sandbox/...", func(e edge) bool {
		return under(e.from, "gates") && e.toMod && under(e.to, "sandbox")
	}},
	{"wrappers imports from the module only bridge/mailbox and internal/...", func(e edge) bool {
		return under(e.from, "wrappers") && e.toMod && !under(e.to, "wrappers") && !under(e.to, "bridge/mailbox") && !under(e.to, "internal")
	}},
	{"bridge (the mailbox server) imports no front end and not the control plane", func(e edge) bool {
		return e.from == "bridge" && e.toMod && (underAny(e.to, frontEnds) || under(e.to, control))
	}},
	{"the leaf internals (internal/{hint,fspath,lossless,hostilefs}) import from the module only each other", func(e edge) bool {
		return underAny(e.from, leaves) && e.toMod && !underAny(e.to, leaves)
	}},
	{"bridge/cmdpolicy (the command policy, transport-neutral) imports nothing from the module", func(e edge) bool {
		return under(e.from, "bridge/cmdpolicy") && e.toMod
	}},
}

// violations lists the edges that break a rule, with the first rule
// each breaks.
func violations(edges []edge) map[string]string {
	out := map[string]string{}
	for _, e := range edges {
		for _, r := range rules {
			if r.bad(e) {
				out[e.String()] = r.name
				break
			}
		}
	}
	return out
}

// TestImportRules checks the import rules on the module's non-test
// imports, and cmd/gatebridge's size, against the allow files.
func TestImportRules(t *testing.T) {
	root, edges := loadEdges(t)
	allowed := readAllow(t, "allow")

	found := violations(edges)
	var keys []string
	for k := range found {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := allowed[k]; !ok {
			t.Errorf("%s breaks a rule: %s\n\tmove the code to a layer that may import it (docs/architecture.md), "+
				"or, for a violation an open step of issue 27 removes, list %q in its allow/stepN.txt", strings.TrimPrefix(k, "import "), found[k], k)
		}
	}
	for k, where := range allowed {
		if _, ok := found[k]; !ok {
			t.Errorf("%s: %q is no longer a violation: delete the line", where, k)
		}
	}

	n, err := countLines(filepath.Join(root, cmdDir))
	if err != nil {
		t.Fatal(err)
	}
	if n >= maxCmdLines {
		t.Errorf("%s has %d non-test lines, the cap is under %d (permanent): its logic belongs in packages (docs/architecture.md)",
			cmdDir, n, maxCmdLines)
	}
	t.Logf("%s: %d non-test lines (cap: under %d)", cmdDir, n, maxCmdLines)
}

// TestRulesCatch shows that each rule catches what it forbids, and lets
// through what it allows.
func TestRulesCatch(t *testing.T) {
	mod := func(from, to string) edge { return edge{from, to, true} }
	for _, tc := range []struct {
		e   edge
		bad bool
	}{
		{mod("cmd/gatebridge", "sandbox/docker"), false},
		{mod("bridge", "sandbox/docker"), true},
		{mod("bridge/rpc", "sandbox/docker"), true},
		{mod("bridge/rpc", "sandbox/bwrap"), true},
		{mod("internal/bench", "sandbox/local"), true},
		{mod("bridge/control", "gates/mcptools"), true},
		{mod("sandbox/docker", "sandbox/agent"), false},
		{mod("sandbox/docker/testimage", "sandbox/docker"), false},
		{mod("gates/mcptools/x", "gates/mcptools"), false},
		{mod("sandbox/sandboxtest", "sandbox/docker"), true},
		{mod("bridge/control", "sandbox"), false},
		{mod("bridge/control", "sandbox/sandboxtest"), true},
		{mod("bridge/control", "bridge/rpc"), true},
		{mod("bridge/control", "bridge/mcpserver"), true},
		{mod("bridge/control", "bridge"), false},
		{mod("bridge/rpc", "sandbox"), false},
		{mod("bridge/rpc", "bridge/mailbox"), true},
		{mod("bridge/rpc/rpctest", "bridge/mailbox"), true},
		{mod("bridge/mcpserver", "bridge/mailbox"), true},
		{mod("bridge/rpc", "bridge/control"), false},
		{mod("bridge/mcpserver", "bridge/rpc"), true},
		{mod("bridge/mcpserver", "bridge/rpc/rpctest"), true},
		{mod("bridge/rpc", "bridge/mcpserver"), true},
		{mod("bridge/rpc/rpctest", "bridge/rpc"), false},
		{mod("bridge/mcpserver", "bridge/control"), false},
		{mod("bridge/mcpserver", "internal/connpool"), false},
		{mod("bridge/mailbox", "internal/lossless"), true},
		{edge{"bridge/mailbox", "golang.org/x/sys/unix", false}, true},
		{edge{"bridge/mailbox", "strings", false}, false},
		{mod("sandbox", "bridge/mailbox"), true},
		{mod("sandbox/docker", "bridge/mailbox"), true},
		{mod("sandbox/local", "gates"), true},
		{mod("sandbox/sandboxtest", "bridge/mailbox"), false},
		{mod("sandbox", "internal/hostilefs"), false},
		{mod("gates", "sandbox"), true},
		{mod("gates/mcptools", "sandbox"), true},
		{mod("gates", "bridge/mailbox"), false},
		{mod("wrappers", "bridge/mailbox"), false},
		{mod("wrappers", "gates"), true},
		{mod("wrappers", "bridge"), true},
		{mod("bridge", "bridge/rpc"), true},
		{mod("bridge", "bridge/control"), true},
		{mod("bridge", "bridge/mailbox"), false},
		{mod("internal/hint", "sandbox"), true},
		{mod("internal/hostilefs", "internal/lossless"), false},
		{mod("internal/bench", "bridge"), false},
		{mod("bridge/cmdpolicy", "internal/hint"), true},
		{edge{"bridge/cmdpolicy", "mvdan.cc/sh/v3/syntax", false}, false},
		{mod("cmd/gatebridge", "bridge/cmdpolicy"), false},
	} {
		_, bad := violations([]edge{tc.e})[tc.e.String()]
		if bad != tc.bad {
			t.Errorf("%s: violation %v, want %v", tc.e, bad, tc.bad)
		}
	}
}

// TestAllowParse checks the allow-file syntax and that a bad line fails.
func TestAllowParse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("step1.txt", "# comment\n\nimport a -> b # why\n")
	write("step2.txt", "import c -> golang.org/x/sys/unix\n")
	allowed, errs := parseAllow(dir)
	if len(errs) != 0 || len(allowed) != 2 || allowed["import a -> b"] != "step1.txt:3" {
		t.Fatalf("parse: %v %v", errs, allowed)
	}
	// The line cap is permanent: an allowance of more lines is refused.
	write("step3.txt", "import a -> b\nimport x y\nlines cmd/gatebridge 4000\nwhatever\n")
	if _, errs := parseAllow(dir); len(errs) != 4 {
		t.Fatalf("want 4 errors (a duplicate, 3 bad lines), got %d: %v", len(errs), errs)
	}
}

func readAllow(t *testing.T, dir string) map[string]string {
	t.Helper()
	allowed, errs := parseAllow(dir)
	for _, err := range errs {
		t.Error(err)
	}
	return allowed
}

// parseAllow reads dir/*.txt: "import FROM -> TO" lines, "#" comments.
// It returns each import allowance with where it is written (file:line).
// cmd/gatebridge's line cap has no allowance (maxCmdLines).
func parseAllow(dir string) (map[string]string, []error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, []error{err}
	}
	allowed := map[string]string{}
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for i := 1; sc.Scan(); i++ {
			text, _, _ := strings.Cut(sc.Text(), "#")
			fields := strings.Fields(text)
			where := fmt.Sprintf("%s:%d", filepath.Base(f), i)
			switch {
			case len(fields) == 0:
			case len(fields) == 4 && fields[0] == "import" && fields[2] == "->":
				k := edge{from: fields[1], to: fields[3]}.String()
				if prev, dup := allowed[k]; dup {
					errs = append(errs, fmt.Errorf("%s: %q is already allowed at %s", where, k, prev))
					continue
				}
				allowed[k] = where
			case len(fields) > 0 && fields[0] == "lines":
				errs = append(errs, fmt.Errorf("%s: %s's cap of under %d lines is permanent (issue 27): no allowance raises it; move the logic into a package", where, cmdDir, maxCmdLines))
			default:
				errs = append(errs, fmt.Errorf("%s: want \"import FROM -> TO\", got %q", where, sc.Text()))
			}
		}
	}
	return allowed, errs
}

// countLines counts the physical lines of dir's non-test .go files.
func countLines(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		n += bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
	}
	return n, nil
}

// goTool is the go command: the one on PATH, else this toolchain's.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// loadEdges lists the module's packages with `go list` for each of
// goosList and returns the module's root and every non-test import.
func loadEdges(t *testing.T) (string, []edge) {
	t.Helper()
	out, err := exec.Command(goTool(), "list", "-m", "-f", "{{.Dir}}\n{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", exitText(err))
	}
	root, module, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		if r, ok := strings.CutPrefix(p, module+"/"); ok {
			return r, true
		}
		return p, false
	}
	seen := map[edge]bool{}
	pkgs := 0
	for _, goos := range goosList {
		cmd := exec.Command(goTool(), "list", "-e", "-json=ImportPath,Imports,Error", "./...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list: %v", goos, exitText(err))
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath string
				Imports    []string
				Error      *struct{ Err string }
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("GOOS=%s go list: %v", goos, err)
			}
			if p.Error != nil && !strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
				t.Errorf("GOOS=%s go list %s: %s", goos, p.ImportPath, p.Error.Err)
			}
			from, ok := rel(p.ImportPath)
			if !ok {
				continue
			}
			pkgs++
			for _, imp := range p.Imports {
				to, toMod := rel(imp)
				seen[edge{from, to, toMod}] = true
			}
		}
	}
	if pkgs == 0 {
		t.Fatal("go list found no packages")
	}
	edges := make([]edge, 0, len(seen))
	for e := range seen {
		edges = append(edges, e)
	}
	return root, edges
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("%v: %s", err, ee.Stderr)
	}
	return err.Error()
}
