package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// quoteSh quotes s for any POSIX shell: every byte but NUL survives.
func quoteSh(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellsIn lists the shells to run a script with inside backend: the
// docker test image has busybox sh and bash, the host has dash too.
func shellsIn(backend string) []string {
	if backend == "docker" {
		return []string{"sh", "bash"}
	}
	return []string{"dash", "bash", "busybox sh"}
}

// writeFiles writes name → content into dir (readable by any sandbox user).
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// plainClient is a v1 mailbox client in plain POSIX sh that knows only the
// documented layout: v1call GATE [ARG...] publishes a call and prints
// "exit=N", then the response's stdout and stderr, each framed.
// v1publish ID GATE [ARG...] only publishes (for hand-made hostile calls,
// use v1dir ID to get the directory and v1wait ID to collect the answer).
const plainClient = `
v1n=0
v1dir() { printf '%s/%s' "$GATEBRIDGE_CALLS_DIR" "$1"; }
v1wait() {
	v1r=$GATEBRIDGE_RESPONSES_DIR/$1; v1k=0
	while [ ! -f "$v1r.exit" ]; do
		v1k=$((v1k+1)); [ "$v1k" -lt 3000 ] || { echo "v1: no answer for $1"; return 1; }
		sleep 0.01
	done
	printf 'exit=%s\n' "$(cat "$v1r.exit")"
	printf '[out]'; [ ! -f "$v1r.stdout" ] || cat "$v1r.stdout"; printf '[/out]\n'
	printf '[err]'; [ ! -f "$v1r.stderr" ] || cat "$v1r.stderr"; printf '[/err]\n'
}
v1call() {
	v1n=$((v1n+1)); v1id=plain-$$-$v1n; v1d=$(v1dir "$v1id")
	mkdir "$v1d" "$v1d/args" || return 1
	v1g=$1; shift; v1a=0
	for v1x do printf '%s' "$v1x" > "$v1d/args/$v1a"; v1a=$((v1a+1)); done
	printf '%s' "$v1g" > "$v1d/gate"
	: > "$v1d/ready"
	v1wait "$v1id"
}
`

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("this attack is about gatebridge running as root")
	}
}

// sleepPids returns the pids whose argv is exactly `sleep marker`.
func sleepPids(marker string) []int {
	var out []int
	m, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(argv) == 2 && filepath.Base(argv[0]) == "sleep" && argv[1] == marker {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// isolating are the backends that must never run a command as host root.
var isolating = []string{"bwrap", "docker"}

func forEachIsolating(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range isolating {
		t.Run(b, func(t *testing.T) {
			needBackend(t, b)
			fn(t, b)
		})
	}
}
