//go:build unix

package gates

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// splitArgs turns fuzz input into argv: arguments are separated by NUL,
// the one byte the mailbox never carries inside an argument.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		"--offset\x005\x00a.txt",
		"--offset=5\x00--limit=2\x00a.txt",
		"a.txt\x00--limit\x003",
		"--\x00-dash",
		"--\x00--\x00--offset",
		"--offset\x00--\x00x",
		"--offset",
		"--offset=",
		"--offset=1=2\x00x",
		"--=x\x00y",
		"---offset\x001",
		"-\x00x",
		"-x",
		"\x00",
		"",
		"--limit\x00-1\x00x",
		"--offset=1\x00--offset=2\x00x",
		"--OFFSET=1\x00x",
		"--offset\xff=1\x00x",
		"a\x00b\x00c",
	} {
		f.Add(seed)
	}
	spec := &argSpec{gate: "read_file", usage: "read_file [--offset N] [--limit N] PATH",
		options: []string{"offset", "limit"}, min: 1, max: 2}
	f.Fuzz(func(t *testing.T, in string) {
		args := splitArgs(in)
		p, err := spec.parse(args)
		if err != nil {
			if ExitCodeOf(0, err) != ExitUsage || !errors.Is(err, ErrUsage) {
				t.Fatalf("%q: error %v does not map to a usage error", args, err)
			}
			if !strings.HasPrefix(err.Error(), "read_file: ") || strings.Contains(err.Error(), "\x00") {
				t.Fatalf("%q: bad message %q", args, err)
			}
			return
		}
		if len(p.pos) < spec.min || len(p.pos) > spec.max {
			t.Fatalf("%q: %d positional arguments", args, len(p.pos))
		}
		for k := range p.opts {
			if !slices.Contains(spec.options, k) {
				t.Fatalf("%q: unknown option %q accepted", args, k)
			}
		}
		// Positional arguments keep their order and bytes.
		i := 0
		for _, a := range args {
			if i < len(p.pos) && a == p.pos[i] {
				i++
			}
		}
		if i != len(p.pos) {
			t.Fatalf("%q: positional %q is not a subsequence of the input", args, p.pos)
		}
		// Everything after the first "--" that is not an option's value is
		// positional.
		if j := slices.Index(args, "--"); j >= 0 && (j == 0 || !isValueSlot(args, j)) {
			tail := args[j+1:]
			if len(p.pos) < len(tail) || !slices.Equal(p.pos[len(p.pos)-len(tail):], tail) {
				t.Fatalf("%q: after --, got %q", args, p.pos)
			}
		}
		// The canonical form parses to the same result.
		var canon []string
		for _, k := range spec.options {
			if v, ok := p.opts[k]; ok {
				canon = append(canon, "--"+k+"="+v)
			}
		}
		canon = append(append(canon, "--"), p.pos...)
		q, err := spec.parse(canon)
		if err != nil || !maps2Equal(p.opts, q.opts) || !slices.Equal(p.pos, q.pos) {
			t.Fatalf("%q: canonical %q parses to %v %q %v", args, canon, q.opts, q.pos, err)
		}
		// Raw parsing keeps every argument.
		raw := &argSpec{gate: "gb_echo", raw: true, max: -1}
		if r, err := raw.parse(args); err != nil || !slices.Equal(r.pos, args) {
			t.Fatalf("%q: raw parse %q %v", args, r.pos, err)
		}
	})
}

// isValueSlot reports whether args[j] is consumed as the value of a
// preceding "--offset"/"--limit" without "=".
func isValueSlot(args []string, j int) bool {
	for i := 0; i < j; i++ {
		a := args[i]
		if a == "--" {
			return false
		}
		if a == "--offset" || a == "--limit" {
			if i+1 == j {
				return true
			}
			i++
		}
	}
	return false
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// FuzzResolvePath feeds hostile paths to read_file, list_dir and write_file
// in a workspace holding symlinks that lead out, a FIFO and a file outside
// the root: nothing outside may ever be read or written, and nothing may
// hang.
func FuzzResolvePath(f *testing.F) {
	for _, seed := range []string{
		"a.txt", "./a.txt", "sub/../a.txt", "../secret.txt", "sub/../../secret.txt",
		"/etc/passwd", "/workspace/a.txt", "/workspace/../secret.txt", "/workspace",
		"link_out", "link_out/", "link_abs", "link_dir_out/secret.txt", "link_in/b.go",
		"loop", "fifo", "", ".", "..", "/", "//a.txt", "a.txt/", "a.txt\x00x",
		"sub/./deep/../b.go", "....//secret.txt", "\xff", "link_in/../../secret.txt",
	} {
		f.Add(seed)
	}
	tmp := f.TempDir()
	ws := filepath.Join(tmp, "ws")
	out := filepath.Join(tmp, "out")
	for _, d := range []string{ws, filepath.Join(ws, "sub"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(tmp, "secret.txt"), []byte("SECRET\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "sub", "b.go"), []byte("b\n"), 0o644)
	syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644)
	for name, target := range map[string]string{
		"link_out": "../secret.txt", "link_abs": filepath.Join(tmp, "secret.txt"),
		"link_dir_out": "..", "link_in": "sub", "loop": "loop",
	} {
		os.Symlink(target, filepath.Join(ws, name))
		os.Symlink(target, filepath.Join(out, name))
	}
	gs, err := Builtins(Options{Root: ws, SandboxRoot: "/workspace", WritableRoot: out, SandboxWritableRoot: "/workspace"})
	if err != nil {
		f.Fatal(err)
	}
	byName := map[string]Gate{}
	for _, g := range gs {
		byName[g.Spec().Name] = g
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, name := range []string{"read_file", "list_dir"} {
			r := callGate(t, byName[name], nil, "--", p)
			if strings.Contains(r.out, "SECRET") || strings.Contains(r.out, "secret.txt") {
				t.Fatalf("%s %q leaked: %q", name, p, r.out)
			}
			if r.code != 0 && r.err == nil {
				t.Fatalf("%s %q: exit %d without an error", name, p, r.code)
			}
		}
		w := &workspace{dir: ws, aliases: []string{ws, "/workspace"}}
		rel, err := w.rel("x", "", p)
		if err == nil && rel != "." && !filepath.IsLocal(rel) {
			t.Fatalf("rel(%q) = %q, not local", p, rel)
		}
		for _, cwd := range []string{"/workspace/a/b", ws + "/a", "/etc", "a", "/workspace/../etc"} {
			if r, err := w.rel("x", cwd, p); err == nil && r != "." && !filepath.IsLocal(r) {
				t.Fatalf("rel(cwd %q, %q) = %q, not local", cwd, p, r)
			}
		}
		r := callGate(t, byName["write_file"], []byte("PWNED"), "--", p)
		if r.code == 0 {
			defer os.RemoveAll(filepath.Join(out, rel))
		}
		if b, _ := os.ReadFile(filepath.Join(tmp, "secret.txt")); string(b) != "SECRET\n" {
			t.Fatalf("write_file %q changed the file outside", p)
		}
		entries, _ := os.ReadDir(tmp)
		for _, e := range entries {
			if n := e.Name(); n != "ws" && n != "out" && n != "secret.txt" {
				t.Fatalf("write_file %q created %q outside", p, n)
			}
		}
	})
}

// FuzzCommandPolicy feeds hostile argument lists to the command-gate policy
// of the safe git_log example. Whatever it accepts, the argv it builds
// holds only allowed options (values matching their patterns, long ones
// joined with "="), then the end-of-options marker, then positionals that
// match their rules: nothing the program could read as another option.
func FuzzCommandPolicy(f *testing.F) {
	for _, seed := range []string{
		"-n\x005\x00HEAD",
		"--oneline\x00--stat\x00-n\x0012",
		"-1\x00--output=/tmp/x\x00--format=x",
		"-n\x00--output=/tmp/x",
		"--\x00--output=/tmp/x",
		"--\x00-n",
		"-c\x00core.pager=id",
		"--oneline=1",
		"-n5",
		"--stat\x00--\x00HEAD~1",
		"HEAD\x00HEAD",
		"",
		"-",
		"--end-of-options\x00--output=x",
		"-n\x00",
		"-n5\x00HEAD",
		"-n=5",
		"-n-5",
		"-n--output=x",
		"-n5\x00--oneline",
	} {
		f.Add(seed)
	}
	p, check := fuzzGitLog(f)
	f.Fuzz(func(t *testing.T, in string) {
		args := splitArgs(in)
		tail, err := p.check(args)
		check(t, args, tail, err)
	})
}

// FuzzParamArgs: a JSON object argument becomes words the policy then
// checks as if typed; whatever the object, the program gets only allowed
// options with valid values and a valid positional after the marker, and
// an argument that is not parameters comes back as it is.
func FuzzParamArgs(f *testing.F) {
	for _, seed := range []string{
		`{"-n":5,"REV":"HEAD"}`, `{"--oneline":true}`, `{"--oneline":"--output=x"}`,
		`{"REV":"--output=/tmp/x"}`, `{"-n":"5 --output=x"}`, `{"--max-count":[1,2]}`,
		`{"REV":["a","b"]}`, `{"REV":null,"-n":1}`, `{"-n":"\u0000"}`, `{}`, `{`, `{"x":1}`,
		`{"REV":"HEAD"} {"REV":"x"}`, "{\"REV\":\"\xff\"}", ` {"--stat":true} `,
	} {
		f.Add(seed)
	}
	p, check := fuzzGitLog(f)
	g := &commandGate{spec: Spec{Name: "git_log", DashDash: true}, policy: p}
	_, g.spec.Params = p.usage()
	f.Fuzz(func(t *testing.T, in string) {
		words, ok, err := ParamArgs(g, []string{in})
		switch {
		case err != nil:
			if ExitCodeOf(0, err) != ExitUsage || !strings.HasPrefix(err.Error(), "git_log: JSON parameters: ") {
				t.Fatalf("%q: %v", in, err)
			}
			return
		case !ok:
			if len(words) != 1 || words[0] != in {
				t.Fatalf("%q: not parameters, yet changed to %q", in, words)
			}
			return
		}
		for _, w := range words {
			if strings.IndexByte(w, 0) >= 0 {
				t.Fatalf("%q: word %q holds NUL", in, w)
			}
		}
		tail, err := p.check(words)
		check(t, words, tail, err)
	})
}

// fuzzGitLog is the git_log policy of the fuzz tests and a check that
// what it lets through reaches the program in canonical form only.
func fuzzGitLog(f *testing.F) (*argPolicy, func(t *testing.T, args, tail []string, err error)) {
	spec := CommandSpec{Name: "git_log", Command: []string{"true"},
		Options:      []OptionRule{{Name: "-n", Value: "[0-9]{1,4}"}, {Name: "--oneline"}, {Name: "--stat"}, {Name: "--max-count", Value: "[0-9]{1,4}"}},
		Args:         []ArgRule{{Name: "REV", Pattern: "[A-Za-z0-9][A-Za-z0-9_./^~-]{0,99}", Optional: true}},
		EndOfOptions: "--end-of-options"}
	g, err := NewCommand(spec)
	if err != nil {
		f.Fatal(err)
	}
	p := g.(*commandGate).policy
	num := regexp.MustCompile(`^[0-9]{1,4}$`)
	rev := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./^~-]{0,99}$`)
	return p, func(t *testing.T, args, tail []string, err error) {
		t.Helper()
		if err != nil {
			if c := ExitCodeOf(0, err); c != ExitDenied && c != ExitUsage {
				t.Fatalf("%q: exit %d for %v", args, c, err)
			}
			if !strings.HasPrefix(err.Error(), "git_log: ") {
				t.Fatalf("%q: message %q", args, err)
			}
			return
		}
		i := 0
		for ; i < len(tail); i++ {
			a := tail[i]
			switch {
			case a == "--oneline" || a == "--stat":
			case a == "-n":
				if i+1 >= len(tail) || !num.MatchString(tail[i+1]) {
					t.Fatalf("%q: -n without a valid value in %q", args, tail)
				}
				i++
			case strings.HasPrefix(a, "--max-count="):
				if !num.MatchString(strings.TrimPrefix(a, "--max-count=")) {
					t.Fatalf("%q: bad --max-count in %q", args, tail)
				}
			case a == "--end-of-options":
				rest := tail[i+1:]
				if len(rest) != 1 || !rev.MatchString(rest[0]) {
					t.Fatalf("%q: positionals %q after the marker", args, rest)
				}
				return
			default:
				t.Fatalf("%q: %q reaches the program as an option (argv %q)", args, a, tail)
			}
		}
	}
}
