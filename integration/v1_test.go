package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlainV1Client checks that a client knowing only the documented v1
// layout (no wrapper, no wake FIFO, polling with sleep) is answered.
func TestPlainV1Client(t *testing.T) {
	script := plainClient + `
v1call gb_echo "plain client" '' 'x  y'
v1call read_file f.txt
v1call read_file /etc/passwd
d=$(v1dir withstdin); mkdir "$d" "$d/args"; printf 'piped\n' > "$d/stdin"; printf gb_echo > "$d/gate"; : > "$d/ready"; v1wait withstdin
d=$(v1dir noargsdir); mkdir "$d"; printf submit > "$d/gate"; : > "$d/ready"; v1wait noargsdir
`
	want := strings.Join([]string{
		"exit=0", "[out]plain client  x  y", "[/out]", "[err][/err]",
		"exit=0", "[out]hello from the workspace", "[/out]", "[err][/err]",
		"exit=126", "[out][/out]", `[err]gatebridge: read_file: "/etc/passwd" is outside the workspace`, "[/err]",
		"exit=0", "[out]piped", "[/out]", "[err][/err]",
		"exit=0", "[out][/out]", "[err][/err]",
		"",
	}, "\n")
	forEachBackend(t, func(t *testing.T, backend string) {
		ws := workspace(t)
		writeFiles(t, ws, map[string]string{"f.txt": "hello from the workspace\n"})
		res, out := gbJSON(t, backend, Run{Dir: ws, Command: []string{"sh", "-c", script}})
		if out.Code != 0 || res.Stderr != "" {
			t.Errorf("exit %d, stderr %q", out.Code, res.Stderr)
		}
		if res.Stdout != want {
			t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
		}
		if len(res.Calls) != 5 {
			t.Errorf("%d calls, want 5", len(res.Calls))
		}
	})
}

// TestPlantedEntries plants a symlink, a FIFO and an oversized file where
// a call's arguments, gate name and stdin go: each call is refused with
// exit 126 and a message naming the problem, the secret the links point
// to never shows, nothing hangs, and the session keeps answering.
func TestPlantedEntries(t *testing.T) {
	secretDir := workspace(t)
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-PLANTED\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := plainClient + `
secret=` + quoteSh(secret) + `
secretdir=` + quoteSh(secretDir) + `
plant() { # plant ID GATE SETUP: make a call, let SETUP fill it, publish, wait
	d=$(v1dir "$1"); mkdir "$d" "$d/args" || return 1
	printf '%s' "$2" > "$d/gate"
	eval "$3"
	: > "$d/ready"
	echo "== $1"; v1wait "$1"
}
plant arg-symlink gb_echo 'ln -s "$secret" "$d/args/0"'
plant arg-fifo gb_echo 'mkfifo "$d/args/0"'
plant arg-oversized gb_echo 'head -c 5000 /dev/zero | tr "\0" a > "$d/args/0"'
plant arg-dir gb_echo 'mkdir "$d/args/0"'
plant gate-symlink x 'rm "$d/gate"; ln -s "$secret" "$d/gate"'
plant gate-fifo x 'rm "$d/gate"; mkfifo "$d/gate"'
plant stdin-symlink gb_echo 'ln -s "$secret" "$d/stdin"'
plant stdin-fifo gb_echo 'mkfifo "$d/stdin"'
plant stdin-oversized gb_echo 'head -c 5000 /dev/zero > "$d/stdin"'
plant args-symlink gb_echo 'rmdir "$d/args"; ln -s "$secretdir" "$d/args"'
# A hard link to the secret only works where it is on the same mount.
if ln "$secret" "$TMPDIR/hl" 2>/dev/null; then
	rm "$TMPDIR/hl"; plant hardlink gb_echo 'ln "$secret" "$d/args/0"'
else
	printf '== hardlink\nnot possible here\n'
fi
echo "== after"; v1call gb_echo still answering
`
	// Each planted call: exit 126 and a message with these words.
	wantErr := map[string]string{
		"arg-symlink":     "args/0 is a symbolic link (refused)",
		"arg-fifo":        "args/0 is not a regular file (refused)",
		"arg-oversized":   "exceed 1000 bytes",
		"arg-dir":         "args/0 is not a regular file (refused)",
		"gate-symlink":    "gate is a symbolic link (refused)",
		"gate-fifo":       "gate is not a regular file (refused)",
		"stdin-symlink":   "stdin is a symbolic link (refused)",
		"stdin-fifo":      "stdin is not a regular file (refused)",
		"stdin-oversized": "stdin exceeds 1000 bytes",
		"args-symlink":    "args is a symbolic link (refused)",
		"hardlink":        "args/0 has more than one hard link (refused)",
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		start := time.Now()
		res, out := gbJSON(t, backend, Run{
			// Sessions next to the secret, so a hard link to it is possible
			// in local mode (the default session dir may be a tmpfs).
			Config:  "bridge:\n  session_dir: " + workspace(t) + "\n  limits:\n    max_arg_bytes: 1000\n    max_stdin_bytes: 1000\n",
			Command: []string{"sh", "-c", script},
		})
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v", d)
		}
		if strings.Contains(out.Stdout+out.Stderr, "TOP-SECRET") {
			t.Fatalf("secret leaked: %s", out.Stdout)
		}
		if out.Code != 0 || res.Stderr != "" {
			t.Errorf("exit %d, stderr %q", out.Code, res.Stderr)
		}
		sections := strings.Split(res.Stdout, "== ")
		seen := map[string]bool{}
		for _, s := range sections[1:] {
			name, body, _ := strings.Cut(s, "\n")
			seen[name] = true
			if name == "hardlink" && body == "not possible here\n" && backend != "local" {
				continue
			}
			if name == "after" {
				if body != "exit=0\n[out]still answering\n[/out]\n[err][/err]\n" {
					t.Errorf("call after the planted ones: %q", body)
				}
				continue
			}
			if !strings.HasPrefix(body, "exit=126\n[out][/out]\n[err]gatebridge: ") || !strings.Contains(body, wantErr[name]) {
				t.Errorf("%s: got %q, want exit 126 and an error containing %q", name, body, wantErr[name])
			}
		}
		for name := range wantErr {
			if !seen[name] {
				t.Errorf("%s: no answer; stdout %q", name, res.Stdout)
			}
		}
		for _, c := range res.Calls {
			want := 126
			if len(c.Args) == 2 && c.Args[0] == "still" {
				want = 0
			}
			if c.ExitCode != want {
				t.Errorf("call %+v: exit %d, want %d", c, c.ExitCode, want)
			}
		}
	})
}
