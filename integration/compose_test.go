package integration

import (
	"strings"
	"testing"
)

// TestComposition checks gates inside pipes, xargs, set -e, $? and
// command substitution, in one run per backend.
func TestComposition(t *testing.T) {
	script := `
read_file f.txt | grep x
echo "search=$(search needle | wc -l | tr -d ' ')"
search 'need(le)' src | sort
(set -e; gb_echo before; read_file /etc/passwd 2>/dev/null; echo after); echo "sete=$?"
list_dir | xargs -n1 echo item
printf 'a\nb\n' | xargs -n1 gb_echo
printf 'c d\n' | xargs gb_echo x
read_file nope 2>/dev/null; echo "q=$?"
gb_echo ok >/dev/null; echo "q=$?"
if read_file nope 2>/dev/null; then echo yes; else echo "else=$?"; fi
read_file f.txt | gb_echo | grep -c o
gb_echo "[$(gb_echo inner "$(gb_echo deep)")]"
printf 'a\nb\n' | submit
`
	want := strings.Join([]string{
		"box", "xylophone", "fox",
		"search=3",
		"src/a.go:2:// needle one", "src/a.go:4:// needle two", "src/b.txt:1:needle",
		"before", "sete=126",
		"item f.txt", "item src/",
		"a", "b",
		"x c d",
		"q=1", "q=0", "else=1",
		"3",
		"[inner deep]",
		"",
	}, "\n")
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		writeFiles(t, ws, map[string]string{
			"f.txt":     "apple\nbox\nxylophone\nfox\n",
			"src/a.go":  "package a\n// needle one\nfunc A() {}\n// needle two\n",
			"src/b.txt": "needle\n",
		})
		res, out := gbJSON(t, backend, Run{Dir: ws, Command: []string{"sh", "-c", script}})
		if out.Code != 0 || res.Stderr != "" {
			t.Errorf("exit %d, stderr %q", out.Code, res.Stderr)
		}
		if res.Stdout != want {
			t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
		}
		if res.Answer == nil || *res.Answer != "a\nb\n" {
			t.Errorf("answer %v, want %q", res.Answer, "a\nb\n")
		}
	})
}

// TestStdin checks what gates read from stdin: submit with arguments
// ignores it (a while-read loop keeps its input), without arguments
// takes it, also from gatebridge's own stdin.
func TestStdin(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		res, out := gbJSON(t, backend, Run{Command: []string{"sh", "-c", `
printf 'one\ntwo\nthree\n' > "$TMPDIR/list"
while read f; do submit "x y"; gb_echo "got $f"; done < "$TMPDIR/list"
while read f; do gb_echo; done < "$TMPDIR/list"
echo end`}})
		if out.Code != 0 {
			t.Errorf("exit %d, stderr %q", out.Code, res.Stderr)
		}
		// gb_echo without arguments takes all of stdin on its first call.
		if want := "got one\ngot two\ngot three\ntwo\nthree\nend\n"; res.Stdout != want {
			t.Errorf("stdout %q, want %q", res.Stdout, want)
		}
		if res.Answer == nil || *res.Answer != "x y" {
			t.Errorf("answer %v, want %q", res.Answer, "x y")
		}
		if len(res.Calls) != 7 {
			t.Errorf("%d calls, want 7", len(res.Calls))
		}

		res, out = gbJSON(t, backend, Run{Stdin: []byte("from\nhost\n"), Command: []string{"sh", "-c", "submit; cat; echo end"}})
		if out.Code != 0 || res.Answer == nil || *res.Answer != "from\nhost\n" || res.Stdout != "end\n" {
			t.Errorf("exit %d, answer %v, stdout %q; want 0, %q, %q", out.Code, res.Answer, res.Stdout, "from\nhost\n", "end\n")
		}
	})
}

// TestCwd: the file gates resolve relative paths against the shell's
// working directory, on every backend (the sandbox sees the workspace at
// /workspace under docker, at its own path under bwrap and local); from a
// directory outside the workspace a relative path is refused with 126.
func TestCwd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		writeFiles(t, ws, map[string]string{
			"top.txt":          "top\n",
			"sub/m.go":         "package m\n",
			"sub/deep/note.md": "deep needle\n",
		})
		res, out := gbJSON(t, backend, Run{Dir: ws, Command: []string{"sh", "-c", `
cd sub && read_file m.go
list_dir
search needle
cd deep && read_file ../../top.txt && search package ..
cd /tmp && read_file m.go; echo "rc=$?"`}})
		inside := ws
		if backend == "docker" {
			inside = "/workspace"
		}
		want := "package m\ndeep/\nm.go\ndeep/note.md:1:deep needle\ntop\n../m.go:1:package m\nrc=126\n"
		if res.Stdout != want {
			t.Errorf("stdout %q, want %q (stderr %q, %q)", res.Stdout, want, res.Stderr, out.Stderr)
		}
		if msg := `read_file: relative path "m.go", but the working directory "/tmp" is outside the workspace: give a path under ` + inside; !strings.Contains(res.Stderr, msg) {
			t.Errorf("stderr %q lacks %q", res.Stderr, msg)
		}
	})
}
