//go:build unix

package gates

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fixture builds
//
//	tmp/secret.txt                 outside the workspace
//	tmp/ws/a.txt, noeol.txt, -dash, sub/b.go, sub/deep/c.txt,
//	       .git/config, bin.dat, fifo,
//	       link_in -> sub, link_file -> a.txt,
//	       link_out -> ../secret.txt, link_abs -> /abs/ws/a.txt
//
// and returns the workspace and the gates by name.
func fixture(t *testing.T, o Options) (string, map[string]Gate) {
	t.Helper()
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	writeFile(t, filepath.Join(tmp, "secret.txt"), "SECRET\n")
	writeFile(t, filepath.Join(ws, "a.txt"), "one\ntwo needle\nthree\n")
	writeFile(t, filepath.Join(ws, "noeol.txt"), "x\ny")
	writeFile(t, filepath.Join(ws, "-dash"), "dash\n")
	writeFile(t, filepath.Join(ws, "sub", "b.go"), "package b\n\nfunc Needle() {}\n")
	writeFile(t, filepath.Join(ws, "sub", "deep", "c.txt"), "needle needle\n")
	writeFile(t, filepath.Join(ws, ".git", "config"), "needle\n")
	writeFile(t, filepath.Join(ws, "bin.dat"), "needle\x00\x01\n")
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"link_in":   "sub",
		"link_file": "a.txt",
		"link_out":  "../secret.txt",
		"link_abs":  filepath.Join(ws, "a.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if o.Root == "" {
		o.Root = ws
	}
	gs, err := Builtins(o)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Gate{}
	for _, g := range gs {
		m[g.Spec().Name] = g
	}
	return ws, m
}

type gateCase struct {
	name  string
	args  []string
	stdin []byte
	code  int
	out   string // "*": anything
	err   string // substring of the error; "" for none
}

func runCases(t *testing.T, g Gate, cases []gateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			callGate(t, g, tc.stdin, tc.args...).check(t, tc.code, tc.out, tc.err)
		})
	}
}

func TestReadFile(t *testing.T) {
	ws, gs := fixture(t, Options{SandboxRoot: "/workspace"})
	a := "one\ntwo needle\nthree\n"
	runCases(t, gs["read_file"], []gateCase{
		{name: "whole", args: []string{"a.txt"}, out: a},
		{name: "offset", args: []string{"--offset", "2", "a.txt"}, out: "two needle\nthree\n"},
		{name: "offset=limit=", args: []string{"--offset=2", "--limit=1", "a.txt"}, out: "two needle\n"},
		{name: "offset 1 is the first line", args: []string{"--offset", "1", "a.txt"}, out: a},
		{name: "option after path", args: []string{"a.txt", "--limit", "2"}, out: "one\ntwo needle\n"},
		{name: "limit 0", args: []string{"--limit", "0", "a.txt"}, out: ""},
		{name: "offset 0", args: []string{"--offset", "0", "a.txt"}, out: a},
		{name: "offset past end", args: []string{"--offset", "99", "a.txt"}, out: ""},
		{name: "no final newline", args: []string{"--offset", "2", "noeol.txt"}, out: "y"},
		{name: "dot segments", args: []string{"sub/../a.txt"}, out: a},
		{name: "absolute inside", args: []string{filepath.Join(ws, "a.txt")}, out: a},
		{name: "sandbox path", args: []string{"/workspace/a.txt"}, out: a},
		{name: "symlink in root", args: []string{"link_file"}, out: a},
		{name: "through symlinked dir", args: []string{"link_in/b.go"}, out: "package b\n\nfunc Needle() {}\n"},
		{name: "dash path after --", args: []string{"--", "-dash"}, out: "dash\n"},
		{name: "dotdot", args: []string{"../secret.txt"}, code: ExitDenied, out: "", err: `read_file: "../secret.txt" is outside the workspace`},
		{name: "dotdot inside", args: []string{"sub/../../secret.txt"}, code: ExitDenied, out: "", err: "outside the workspace"},
		{name: "absolute outside", args: []string{"/etc/passwd"}, code: ExitDenied, out: "", err: `"/etc/passwd" is outside the workspace`},
		{name: "sandbox path prefix only", args: []string{"/workspacex/a.txt"}, code: ExitDenied, out: "", err: "outside"},
		{name: "symlink out", args: []string{"link_out"}, code: ExitDenied, out: "", err: `"link_out" is outside the workspace`},
		{name: "absolute symlink", args: []string{"link_abs"}, code: ExitDenied, out: "", err: "outside"},
		{name: "fifo", args: []string{"fifo"}, code: ExitDenied, out: "", err: "named pipe"},
		{name: "directory", args: []string{"sub"}, code: ExitFailure, out: "", err: `read_file: "sub" is a directory`},
		{name: "missing", args: []string{"nope"}, code: ExitFailure, out: "", err: `read_file: stat "nope": no such file`},
		{name: "no path", code: ExitUsage, out: "", err: "missing argument"},
		{name: "two paths", args: []string{"a.txt", "b"}, code: ExitUsage, out: "", err: "too many arguments"},
		{name: "unknown option", args: []string{"--bogus", "a.txt"}, code: ExitUsage, out: "", err: `unknown option "--bogus"`},
		{name: "dash path without --", args: []string{"-dash"}, code: ExitUsage, out: "", err: `unknown option "-dash"`},
		{name: "bad offset", args: []string{"--offset", "x", "a.txt"}, code: ExitUsage, out: "", err: "--offset wants a non-negative integer"},
		{name: "negative limit", args: []string{"--limit=-1", "a.txt"}, code: ExitUsage, out: "", err: "--limit wants"},
		{name: "offset twice", args: []string{"--offset=1", "--offset=2", "a.txt"}, code: ExitUsage, out: "", err: "more than once"},
		{name: "empty path", args: []string{""}, code: ExitUsage, out: "", err: "empty path"},
	})
}

// The line number search prints, given to read_file --offset, shows that
// line first: the numbers a model copies from one gate work in the other.
func TestSearchLineFeedsReadFileOffset(t *testing.T) {
	_, gs := fixture(t, Options{})
	for _, pat := range []string{"needle", "three", "one"} {
		r := callGate(t, gs["search"], nil, pat, "a.txt")
		m := regexp.MustCompile(`^a\.txt:(\d+):(.*)\n`).FindStringSubmatch(r.out)
		if r.code != 0 || m == nil {
			t.Fatalf("search %s: exit %d, %q", pat, r.code, r.out)
		}
		got := callGate(t, gs["read_file"], nil, "--offset", m[1], "--limit", "1", "a.txt")
		if got.code != 0 || got.out != m[2]+"\n" {
			t.Errorf("search printed line %s %q; read_file --offset %s --limit 1 printed %q", m[1], m[2], m[1], got.out)
		}
	}
}

func TestReadFileLimits(t *testing.T) {
	ws, gs := fixture(t, Options{MaxFileBytes: 10})
	writeFile(t, filepath.Join(ws, "big.txt"), "line1\nline2\nline3\n")
	writeFile(t, filepath.Join(ws, "long.txt"), strings.Repeat("x", 25)+"\n")
	runCases(t, gs["read_file"], []gateCase{
		{name: "whole too big", args: []string{"big.txt"}, code: ExitDenied, out: "", err: "over the 10-byte limit"},
		{name: "ranged", args: []string{"--offset", "3", "big.txt"}, out: "line3\n"},
		{name: "ranged still bounded", args: []string{"--limit", "3", "big.txt"}, code: ExitDenied, out: "line1\nline", err: "stopped after 10 bytes"},
		{name: "long line bounded", args: []string{"--limit", "1", "long.txt"}, code: ExitDenied, out: "xxxxxxxxxx", err: "stopped after 10 bytes"},
		{name: "exactly at limit", args: []string{"noeol.txt"}, out: "x\ny"},
	})
}

func TestReadFileLongLines(t *testing.T) {
	ws, gs := fixture(t, Options{})
	long := strings.Repeat("ab", 100<<10) // longer than the read buffer
	writeFile(t, filepath.Join(ws, "long.txt"), "first\n"+long+"\nlast\n")
	runCases(t, gs["read_file"], []gateCase{
		{name: "skip long line", args: []string{"--offset", "3", "long.txt"}, out: "last\n"},
		{name: "print long line", args: []string{"--offset", "2", "--limit", "1", "long.txt"}, out: long + "\n"},
	})
}

func TestListDir(t *testing.T) {
	_, gs := fixture(t, Options{})
	root := "-dash\n.git/\na.txt\nbin.dat\nfifo\nlink_abs\nlink_file\nlink_in\nlink_out\nnoeol.txt\nsub/\n"
	runCases(t, gs["list_dir"], []gateCase{
		{name: "root", out: root},
		{name: "dot", args: []string{"."}, out: root},
		{name: "sub", args: []string{"sub"}, out: "b.go\ndeep/\n"},
		{name: "trailing slash", args: []string{"sub/"}, out: "b.go\ndeep/\n"},
		{name: "symlinked dir in root", args: []string{"link_in"}, out: "b.go\ndeep/\n"},
		{name: "dotdot", args: []string{".."}, code: ExitDenied, out: "", err: `list_dir: ".." is outside the workspace`},
		{name: "absolute outside", args: []string{"/"}, code: ExitDenied, out: "", err: "outside"},
		{name: "file", args: []string{"a.txt"}, code: ExitFailure, out: "", err: `list_dir: "a.txt" is not a directory`},
		{name: "fifo", args: []string{"fifo"}, code: ExitFailure, out: "", err: "not a directory"},
		{name: "symlink out", args: []string{"link_out"}, code: ExitDenied, out: "", err: "outside"},
		{name: "missing", args: []string{"nope"}, code: ExitFailure, out: "", err: "no such file"},
		{name: "too many", args: []string{"a", "b"}, code: ExitUsage, out: "", err: "too many arguments"},
	})
}

func TestListDirCapAndOddNames(t *testing.T) {
	ws, gs := fixture(t, Options{MaxDirEntries: 2})
	writeFile(t, filepath.Join(ws, "odd", "new\nline"), "")
	writeFile(t, filepath.Join(ws, "odd", "plain"), "")
	runCases(t, gs["list_dir"], []gateCase{
		{name: "capped", out: "*"},
		{name: "quoted", args: []string{"odd"}, out: "\"new\\nline\"\nplain\n"},
	})
	r := callGate(t, gs["list_dir"], nil)
	if lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n"); len(lines) != 3 || lines[2] != "... listing stopped at 2 entries" {
		t.Errorf("capped listing: %q", r.out)
	}
}

// Names that list_dir and search print can be passed back to the file
// gates as they are (docs: list_dir's usage). A name with a byte that is
// not UTF-8 is printed raw, so `list_dir | while read -r n; do read_file
// "$n"` works for it; a name with a newline (or another control
// character) is printed in Go's quoted form on one line, and the file
// gates take that quoted form back; so is a name that starts with a
// double quote, so that a file literally called "\xff" (quotes and
// backslash included) never reads like the quoted form of the byte 0xff.
func TestOddNamesRoundTrip(t *testing.T) {
	ws, gs := fixture(t, Options{})
	names := map[string]string{
		"caf\xe9.txt": "latin-1\n",
		"new\nline":   "newline\n",
		"\xff":        "byte ff\n",
		`"\xff"`:      "forged ff\n",
		"tab\there":   "tab\n",
		"é \\x.txt":   "backslash\n",
		"\"a\\nb\"":   "literal quoted\n",
		"a\nb":        "real newline\n",
	}
	for n, body := range names {
		writeFile(t, filepath.Join(ws, "odd", n), body)
	}
	if err := os.Mkdir(filepath.Join(ws, "odd", "dir\nx"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "odd", "dir\nx", "in.txt"), "inside\n")
	r := callGate(t, gs["list_dir"], nil, "odd")
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	if len(lines) != len(names)+1 {
		t.Fatalf("list_dir printed %d lines for %d entries: %q", len(lines), len(names)+1, r.out)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Fatalf("two entries print as %q", l)
		}
		seen[l] = true
	}
	for _, want := range []string{"caf\xe9.txt", "\xff", "é \\x.txt", `"new\nline"`, `"a\nb"`, `"\"\\xff\""`, `"\"a\\nb\""`, `"tab\there"`, `"dir\nx/"`} {
		if !seen[want] {
			t.Errorf("list_dir odd: no line %q in %q", want, r.out)
		}
	}
	// Every line read_file takes back, from inside odd/, gives that file.
	cwd := filepath.Join(ws, "odd")
	for _, l := range lines {
		if strings.HasSuffix(l, "/") || strings.HasSuffix(l, `/"`) {
			continue
		}
		r := callGateIn(t, context.Background(), cwd, gs["read_file"], nil, l)
		var want string
		for n, body := range names {
			if displayName(n) == l {
				want = body
			}
		}
		if r.code != 0 || r.out != want {
			t.Errorf("read_file %q: code %d out %q err %v; want %q", l, r.code, r.out, r.err, want)
		}
	}
	// A quoted directory, with the slash list_dir adds, lists back.
	if r := callGateIn(t, context.Background(), cwd, gs["list_dir"], nil, `"dir\nx/"`); r.code != 0 || r.out != "in.txt\n" {
		t.Errorf("list_dir of the quoted dir: %d %q %v", r.code, r.out, r.err)
	}
	// search prints paths by the same rule, and they read back from the
	// workspace root.
	r = callGate(t, gs["search"], nil, "^(latin-1|real newline|forged ff|inside)$", "odd")
	want := "odd/\"\\xff\":1:forged ff\n\"odd/a\\nb\":1:real newline\nodd/caf\xe9.txt:1:latin-1\n\"odd/dir\\nx/in.txt\":1:inside\n"
	if r.out != want {
		t.Fatalf("search:\n got %q\nwant %q", r.out, want)
	}
	for _, l := range strings.Split(strings.TrimSuffix(r.out, "\n"), "\n") {
		i := strings.LastIndex(l, ":1:")
		if r := callGate(t, gs["read_file"], nil, l[:i]); r.out != l[i+3:]+"\n" {
			t.Errorf("read_file of search's path %q: %q %v", l[:i], r.out, r.err)
		}
	}
	// A quoted form that does not name a file is reported quoted again,
	// and an unquoted NUL is still refused.
	if r := callGate(t, gs["read_file"], nil, `"odd/nope\xff"`); r.code != ExitFailure || !strings.Contains(r.errText(), `"odd/nope\xff"`) {
		t.Errorf("missing quoted file: %d %v", r.code, r.err)
	}
	if r := callGate(t, gs["read_file"], nil, `"a\x00b"`); r.code != ExitUsage || !strings.Contains(r.errText(), "NUL") {
		t.Errorf("quoted NUL: %d %v", r.code, r.err)
	}
}

func TestSearch(t *testing.T) {
	ws, gs := fixture(t, Options{})
	runCases(t, gs["search"], []gateCase{
		{name: "root", args: []string{"(?i)needle"}, out: "a.txt:2:two needle\nsub/b.go:3:func Needle() {}\nsub/deep/c.txt:1:needle needle\n"},
		{name: "subdir", args: []string{"needle", "sub"}, out: "sub/deep/c.txt:1:needle needle\n"},
		{name: "symlinked dir arg", args: []string{"Needle", "link_in"}, out: "link_in/b.go:3:func Needle() {}\n"},
		{name: "file", args: []string{"^t", "a.txt"}, out: "a.txt:2:two needle\na.txt:3:three\n"},
		{name: "absolute path", args: []string{"one", ws}, out: "a.txt:1:one\n"},
		{name: "no match", args: []string{"zzz"}, code: ExitFailure, out: ""},
		{name: "bad pattern", args: []string{"("}, code: ExitUsage, out: "", err: "search: bad pattern"},
		{name: "dotdot", args: []string{"x", ".."}, code: ExitDenied, out: "", err: "outside the workspace"},
		{name: "symlink out", args: []string{"x", "link_out"}, code: ExitDenied, out: "", err: "outside the workspace"},
		{name: "fifo", args: []string{"x", "fifo"}, code: ExitDenied, out: "", err: "named pipe"},
		{name: "no pattern", code: ExitUsage, out: "", err: "missing argument"},
		{name: "dash pattern", args: []string{"--", "-dash"}, code: ExitFailure, out: ""},
	})
}

func TestSearchCap(t *testing.T) {
	ws, gs := fixture(t, Options{MaxSearchMatches: 2, MaxSearchFileBytes: 100})
	writeFile(t, filepath.Join(ws, "many", "m.txt"), "hit 1\nhit 2\nmiss\nhit 3\n")
	writeFile(t, filepath.Join(ws, "many", "n.txt"), "hit 4\nhit 5\n")
	writeFile(t, filepath.Join(ws, "many", "z-big.txt"), strings.Repeat("hit\n", 30))
	callGate(t, gs["search"], nil, "hit", "many").check(t, 0,
		"many/m.txt:1:hit 1\nmany/m.txt:2:hit 2\n... 3 more matches\n", "")
	r := callGate(t, gs["search"], nil, "hit", "many/z-big.txt")
	r.check(t, ExitFailure, "", "")
	if !strings.Contains(r.errOut, "larger than 100 bytes") {
		t.Errorf("stderr %q: want a note about the skipped file", r.errOut)
	}
}

func TestSearchFileCap(t *testing.T) {
	ws, gs := fixture(t, Options{MaxSearchFiles: 1})
	writeFile(t, filepath.Join(ws, "two", "a"), "hit\n")
	writeFile(t, filepath.Join(ws, "two", "b"), "hit\n")
	r := callGate(t, gs["search"], nil, "hit", "two")
	r.check(t, 0, "two/a:1:hit\n", "")
	if !strings.Contains(r.errOut, "stopped after reading 1 files") {
		t.Errorf("stderr %q", r.errOut)
	}
}

func TestWriteFileOffByDefault(t *testing.T) {
	_, gs := fixture(t, Options{})
	if _, ok := gs["write_file"]; ok {
		t.Fatal("write_file registered without WritableRoot")
	}
}

func TestWriteFile(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	writeFile(t, filepath.Join(out, "exists.txt"), "old")
	os.Chmod(filepath.Join(out, "exists.txt"), 0o600)
	writeFile(t, filepath.Join(tmp, "elsewhere", "x"), "")
	os.Symlink("../elsewhere", filepath.Join(out, "dirlink"))
	os.Symlink("exists.txt", filepath.Join(out, "filelink"))
	os.Mkdir(filepath.Join(out, "adir"), 0o755)
	os.Mkdir(filepath.Join(out, "indir"), 0o755)
	os.Symlink("indir", filepath.Join(out, "inlink"))
	syscall.Mkfifo(filepath.Join(out, "fifo"), 0o644)
	_, gs := fixture(t, Options{WritableRoot: out, SandboxWritableRoot: "/out", MaxFileBytes: 100})
	g := gs["write_file"]
	if g.Spec().Stdin != StdinAlways {
		t.Errorf("stdin mode %v", g.Spec().Stdin)
	}
	content := []byte("new\x00\xff\ncontent")
	runCases(t, g, []gateCase{
		{name: "new nested", args: []string{"a/b/c.txt"}, stdin: content},
		{name: "replace", args: []string{"exists.txt"}, stdin: []byte("replaced")},
		{name: "sandbox path", args: []string{"/out/s.txt"}, stdin: []byte("s")},
		{name: "empty stdin", args: []string{"empty.txt"}},
		{name: "dotdot", args: []string{"../escape.txt"}, stdin: content, code: ExitDenied, out: "", err: "outside the workspace"},
		{name: "absolute outside", args: []string{"/tmp/escape.txt"}, stdin: content, code: ExitDenied, out: "", err: "outside the workspace"},
		{name: "symlinked dir out", args: []string{"dirlink/x"}, stdin: content, code: ExitDenied, out: "", err: `"dirlink" is a symlink`},
		{name: "symlinked dir in", args: []string{"inlink/x"}, stdin: content, code: ExitDenied, out: "", err: "symlink"},
		{name: "symlink file", args: []string{"filelink"}, stdin: content, code: ExitDenied, out: "", err: "symlink"},
		{name: "directory", args: []string{"adir"}, stdin: content, code: ExitFailure, out: "", err: `write_file: "adir" is a directory`},
		{name: "root", args: []string{"."}, stdin: content, code: ExitFailure, out: "", err: "is a directory"},
		{name: "under a file", args: []string{"exists.txt/x"}, stdin: content, code: ExitFailure, out: "", err: "not a directory"},
		{name: "fifo", args: []string{"fifo"}, stdin: content, code: ExitDenied, out: "", err: "named pipe"},
		{name: "too big", args: []string{"big"}, stdin: make([]byte, 101), code: ExitDenied, out: "", err: "over the 100-byte limit"},
	})
	for path, want := range map[string]string{
		"a/b/c.txt":        string(content),
		"exists.txt":       "replaced",
		"s.txt":            "s",
		"empty.txt":        "",
		"../elsewhere/x":   "",
		"../secret.txt.no": "<missing>",
	} {
		b, err := os.ReadFile(filepath.Join(out, path))
		got := string(b)
		if err != nil {
			got = "<missing>"
		}
		if got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if fi, _ := os.Stat(filepath.Join(out, "exists.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(tmp, "escape.txt")); err == nil {
		t.Error("escape.txt written outside")
	}
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if strings.Contains(p, ".gb-tmp-") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}

func TestWriteFileAtomic(t *testing.T) {
	out := t.TempDir()
	writeFile(t, filepath.Join(out, "f"), "old")
	_, gs := fixture(t, Options{WritableRoot: out})
	old, err := os.Open(filepath.Join(out, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	callGate(t, gs["write_file"], []byte("new"), "f").check(t, 0, "", "")
	// A reader that opened the file before sees the old inode, whole.
	b := make([]byte, 10)
	n, _ := old.Read(b)
	if string(b[:n]) != "old" {
		t.Errorf("old descriptor reads %q; the file was rewritten in place", b[:n])
	}
	if b, _ := os.ReadFile(filepath.Join(out, "f")); string(b) != "new" {
		t.Errorf("new content %q", b)
	}
}

func TestSubmit(t *testing.T) {
	_, gs := fixture(t, Options{})
	g := gs["submit"]
	for _, tc := range []struct {
		name  string
		args  []string
		stdin []byte
		want  string
	}{
		{"args", []string{"the", "answer", "--x", "--"}, nil, "the answer --x --"},
		{"one arg", []string{"  spaced  "}, []byte("ignored"), "  spaced  "},
		{"empty arg", []string{""}, []byte("ignored"), ""},
		{"stdin", nil, []byte("from\nstdin\n"), "from\nstdin\n"},
		{"nothing", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := callGate(t, g, tc.stdin, tc.args...)
			r.check(t, 0, "", "")
			if r.answer == nil || *r.answer != tc.want {
				t.Errorf("answer %v, want %q", r.answer, tc.want)
			}
		})
	}
	if code, err := g.Call(t.Context(), &Call{Args: []string{"x"}}); code != 0 || err != nil {
		t.Errorf("nil Results and writers: %d %v", code, err)
	}
}

func TestEcho(t *testing.T) {
	_, gs := fixture(t, Options{})
	runCases(t, gs["gb_echo"], []gateCase{
		{name: "args", args: []string{"a", "b"}, out: "a b\n"},
		{name: "byte exact", args: []string{"\xff\xfe", "", "x\ny", " ", "\r"}, out: "\xff\xfe  x\ny   \r\n"},
		{name: "options literal", args: []string{"--offset", "-n", "--"}, out: "--offset -n --\n"},
		{name: "empty arg", args: []string{""}, out: "\n"},
		{name: "stdin", stdin: []byte("in\x00\xff"), out: "in\x00\xff"},
		{name: "no stdin", out: ""},
	})
}

func TestBuiltinSpecs(t *testing.T) {
	o := Options{Root: t.TempDir(), WritableRoot: t.TempDir()}
	r := NewRegistry()
	if err := RegisterBuiltins(r, o); err != nil {
		t.Fatal(err)
	}
	want := map[string]StdinMode{
		"read_file": StdinNone, "list_dir": StdinNone, "search": StdinNone,
		"write_file": StdinAlways, "submit": StdinIfNoArgs, "gb_echo": StdinIfNoArgs,
	}
	if r.Len() != len(want) {
		t.Errorf("%d gates, want %d", r.Len(), len(want))
	}
	for _, s := range r.Specs() {
		if s.Summary == "" || s.Usage == "" || len(s.Params) == 0 {
			t.Errorf("%s: incomplete spec %+v", s.Name, s)
		}
		if !strings.HasPrefix(s.Usage, s.Name) {
			t.Errorf("%s: usage %q", s.Name, s.Usage)
		}
		if m, ok := want[s.Name]; !ok || m != s.Stdin {
			t.Errorf("%s: stdin %v, want %v", s.Name, s.Stdin, m)
		}
	}
	if err := RegisterBuiltins(r, o); err == nil {
		t.Error("registering the built-ins twice succeeded")
	}
}

func TestBuiltinsOptions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	writeFile(t, file, "")
	for _, tc := range []struct {
		name string
		o    Options
		err  string
	}{
		{"no root", Options{}, "root is required"},
		{"missing root", Options{Root: "/nonexistent-gb"}, "root"},
		{"root is a file", Options{Root: file}, "not a directory"},
		{"bad writable", Options{Root: t.TempDir(), WritableRoot: file}, "writable_root"},
		{"relative sandbox root", Options{Root: t.TempDir(), SandboxRoot: "ws"}, "not absolute"},
		{"negative", Options{Root: t.TempDir(), MaxFileBytes: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Builtins(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// write_file refuses protected paths (.git: its config and hooks are run by
// host tools), however the path is spelled.
func TestWriteFileProtected(t *testing.T) {
	out := t.TempDir()
	writeFile(t, filepath.Join(out, ".git", "config"), "[core]\n")
	_, gs := fixture(t, Options{WritableRoot: out, ProtectedPaths: []string{".git", "deep/keep"}})
	for _, p := range []string{".git/config", ".git/hooks/pre-commit", "./.git/config", "sub/../.git/config", ".GIT/config", ".git", "deep/keep/x",
		"sub/.git/hooks/post-checkout", "a/b/.Git/config", filepath.Join(out, ".git", "x"), "DEEP/Keep"} {
		callGate(t, gs["write_file"], []byte("pwned"), "--", p).check(t, ExitDenied, "", "protected path")
	}
	if b, _ := os.ReadFile(filepath.Join(out, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config is %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, ".git", "hooks")); err == nil {
		t.Error("hooks dir created")
	}
	// Names that only start like a protected path are fine.
	callGate(t, gs["write_file"], []byte("ok"), ".gitignore").check(t, 0, "", "")
	callGate(t, gs["write_file"], []byte("ok"), "deep/keeper").check(t, 0, "", "")
	callGate(t, gs["write_file"], []byte("ok"), "sub/deep/keep").check(t, 0, "", "")
	callGate(t, gs["write_file"], []byte("ok"), "sub/x.git/y").check(t, 0, "", "")
}

// search over a 4 MiB one-line file kept two host cores busy for 30 s past
// its 5 s timeout: the context was only checked between files. Now it is
// checked per line and, within a long line, every few KiB of input, and a
// pattern whose program is too large is refused up front (exit 2).
func TestSearchBounded(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "big"), strings.Repeat("a", 4<<20))
	_, gs := fixture(t, Options{Root: root, MaxSearchFileBytes: 8 << 20})
	var alts []string
	for _, c := range "abcdefghijklmnopqrstuvwxyz" {
		alts = append(alts, string(c), string(c)+string(c))
	}
	huge := "(" + strings.Join(alts, "|") + "){1000}Q"
	start := time.Now()
	callGate(t, gs["search"], nil, huge, "big").check(t, ExitUsage, "", "pattern too complex")
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing the pattern took %v", d)
	}
	// Allowed but slow: (instructions × 4 MiB) takes ~17 s unbounded. The
	// bound is relative to this machine right now (-race, load): the time
	// to search a 16 KiB line, ×256, is what the whole line would take
	// (16 KiB, not more: under -race on a loaded 2-core machine the
	// small search alone must stay well inside callGate's wait).
	heavy := "[ab]{500}c"
	writeFile(t, filepath.Join(root, "small"), strings.Repeat("a", 16<<10))
	start = time.Now()
	callGate(t, gs["search"], nil, heavy, "small").check(t, ExitFailure, "", "")
	full := 256 * time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	r := callGateCtx(t, ctx, gs["search"], nil, heavy, "big")
	if d := time.Since(start); d > 300*time.Millisecond+full/4 {
		t.Errorf("search returned %v after a 300ms deadline (the whole line takes ~%v here): it did not check its context inside the line", d, full)
	}
	if r.err == nil || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the deadline", r.err)
	}
	// And nothing keeps matching once it returned: the process is idle.
	before := cpuTime(t)
	time.Sleep(500 * time.Millisecond)
	if used := cpuTime(t) - before; used > 200*time.Millisecond {
		t.Errorf("%v of CPU used in the 500ms after search returned", used)
	}
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A long line is matched as one input, not in pieces: ^ and $ match only
// at its ends, and a match spanning any internal boundary is found.
func TestSearchLongLineExact(t *testing.T) {
	root := t.TempDir()
	line := []byte(strings.Repeat("x", 300<<10))
	copy(line[15<<10:], "abc")                              // where a 16 KiB chunking restarted
	copy(line[104<<10:], "Q"+strings.Repeat("m", 3000)+"Z") // across 106 KiB, another old chunk edge
	writeFile(t, filepath.Join(root, "long"), string(line)+"\nabc\n")
	_, gs := fixture(t, Options{Root: root})
	for _, tc := range []struct {
		pat  string
		code int
		out  string
	}{
		{"^abc", 0, "long:2:abc\n"},
		{"abc$", 0, "long:2:abc\n"},
		{"^x+abcx", 0, "long:1:" + strings.Repeat("x", 500) + "…\n"},
		{"^x+$", 1, ""},
		{"xQm+Zx", 0, "long:1:" + strings.Repeat("x", 500) + "…\n"},
		{"Qm{1000}Z", 1, ""},
	} {
		r := callGate(t, gs["search"], nil, tc.pat, "long")
		if r.code != tc.code || r.out != tc.out {
			t.Errorf("search %q: exit %d, stdout %.80q; want %d %.80q", tc.pat, r.code, r.out, tc.code, tc.out)
		}
	}
}
