// Package wrappers generates the POSIX sh scripts that stand in for gates
// inside the sandbox.
//
// A wrapper publishes one call in the v1 mailbox layout and waits for the
// host's answer:
//
//	calls/<id>/args/0 … args/N-1   one file per argument (printf '%s' > file)
//	calls/<id>/gate                the gate name
//	calls/<id>/stdin               only for gates that read stdin, only when
//	                               stdin is not a terminal
//	calls/<id>/wake                extension: a FIFO the host writes a byte to
//	calls/<id>/ready               empty marker, written last
//
// then prints responses/<id>.stdout and .stderr and exits with the code in
// responses/<id>.exit. The script runs under dash, bash and busybox sh and
// costs three process starts per call (sh, mkdir, mkfifo); it adds cat only
// when the host marks the output as large or binary (no responses/<id>.text
// marker). Call ids come from the kernel's random uuid (unique across PID
// namespaces); mkdir without -p claims the id atomically.
//
// # Waiting
//
// With GATEBRIDGE_WAKE=fifo (the default) the wrapper opens its wake FIFO
// read-write before publishing, so it never blocks on open, and then blocks
// in the read builtin: no CPU until the host writes. Shells with `read -t`
// (bash, busybox) also re-check every GATEBRIDGE_WAKE_CHECK seconds, so a
// lost wake-up costs latency, never a hang. With GATEBRIDGE_WAKE=poll (or
// when mkfifo fails) the wrapper polls for the .exit file with a backoff
// from 1 ms to 100 ms. It gives up with exit 124 when polling after
// GATEBRIDGE_WAIT_TIMEOUT seconds (0 = never), and under a shell with
// `read -t` after that many seconds without a byte from the host (the host
// writes a heartbeat byte to every waiting call's FIFO each rescan
// interval, so a long queue or a slow gate does not count);
// under dash (no `read -t`, the usual /bin/sh on Debian and Ubuntu) the
// FIFO wait has no timeout and ends only when the host writes the wake
// byte, so a call the host never answers blocks until the wrapper is
// killed.
//
// Generated text never contains the gate's description or usage verbatim:
// only a sanitized one-line summary inside a comment, so no description can
// inject shell code.
package wrappers

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// StdinMode says when a wrapper forwards its standard input.
type StdinMode int

const (
	StdinNone     StdinMode = iota // never
	StdinIfNoArgs                  // only when called with no arguments
	StdinAlways                    // always (unless stdin is a terminal)
)

// Spec is what a wrapper needs to know about a gate.
type Spec struct {
	Name    string
	Summary string // shown in a comment; sanitized
	Stdin   StdinMode
}

// Environment variables the wrappers read.
const (
	EnvCallsDir     = "GATEBRIDGE_CALLS_DIR"
	EnvResponsesDir = "GATEBRIDGE_RESPONSES_DIR"
	EnvWake         = "GATEBRIDGE_WAKE"         // fifo (default) | poll
	EnvWaitTimeout  = "GATEBRIDGE_WAIT_TIMEOUT" // seconds, 0 = none
	EnvWakeCheck    = "GATEBRIDGE_WAKE_CHECK"   // seconds between re-checks in fifo mode
)

// Generate writes the wrapper script for s to w.
func Generate(w io.Writer, s Spec) error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "# gatebridge wrapper for gate %s (generated, do not edit)\n", s.Name)
	if sum := sanitizeComment(s.Summary); sum != "" {
		fmt.Fprintf(&b, "# %s\n", sum)
	}
	fmt.Fprintf(&b, "g='%s'\n", s.Name) // name is [A-Za-z0-9_.+-]: safe in single quotes
	b.WriteString(scriptHead)
	switch s.Stdin {
	case StdinAlways:
		b.WriteString(stdinAlways)
	case StdinIfNoArgs:
		b.WriteString(stdinIfNoArgs)
	}
	b.WriteString(scriptTail)
	_, err := w.Write(b.Bytes())
	return err
}

// Script returns the wrapper script for s.
func Script(s Spec) ([]byte, error) {
	var b bytes.Buffer
	err := Generate(&b, s)
	return b.Bytes(), err
}

// WriteDir writes one executable wrapper per spec into dir (mode 0755),
// each as a temp file renamed into place.
func WriteDir(dir string, specs []Spec) error {
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			return fmt.Errorf("wrappers: duplicate gate name %q", s.Name)
		}
		seen[s.Name] = true
		script, err := Script(s)
		if err != nil {
			return fmt.Errorf("wrappers: %w", err)
		}
		tmp, err := os.CreateTemp(dir, ".wrapper-*")
		if err != nil {
			return fmt.Errorf("wrappers: write %s: %w", s.Name, err)
		}
		_, werr := tmp.Write(script)
		cerr := tmp.Close()
		if err := firstErr(werr, cerr, os.Chmod(tmp.Name(), 0o755)); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("wrappers: write %s: %w", s.Name, err)
		}
		if err := os.Rename(tmp.Name(), filepath.Join(dir, s.Name)); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("wrappers: write %s: %w", s.Name, err)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sanitizeComment keeps printable text on one line.
func sanitizeComment(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == 0xfffd {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, " "))
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// AckSuffix names the file a wrapper creates in calls/ (calls/<id>.done)
// once it has printed the response of call <id>: the host then removes the
// response files, so a session holds only unread responses.
const AckSuffix = ".done"

// The script body. Variables are short and prefixed to stay out of the way;
// everything except mkdir, mkfifo (and cat for stdin or big output) is a
// builtin in dash, bash and busybox sh.
const scriptHead = `c=${GATEBRIDGE_CALLS_DIR:-${0%/*}/../calls}
r=${GATEBRIDGE_RESPONSES_DIR:-${0%/*}/../responses}
gb_fail() { printf 'gatebridge: %s: %s\n' "$g" "$2" >&2; exit "$1"; }
if ! { read -r i < /proc/sys/kernel/random/uuid; } 2>/dev/null || [ -z "$i" ]; then
	i=p$$-${PPID:-0}-$#
fi
n=0
until mkdir "$c/$i" "$c/$i/args" 2>/dev/null; do
	[ -d "$c" ] || gb_fail 1 "calls dir $c does not exist (is the session mounted? set GATEBRIDGE_CALLS_DIR)"
	n=$((n+1)); [ "$n" -lt 20 ] || gb_fail 1 "cannot create a call in $c"
	i=$i-$n
done
d=$c/$i
n=0
for a do
	printf '%s' "$a" > "$d/args/$n" || gb_fail 1 "cannot write argument $n"
	n=$((n+1))
done
printf '%s' "$g" > "$d/gate" || gb_fail 1 "cannot write call"
`

const stdinAlways = `if [ ! -t 0 ]; then cat > "$d/stdin" || gb_fail 1 "cannot write stdin"; fi
`

const stdinIfNoArgs = `if [ "$#" -eq 0 ] && [ ! -t 0 ]; then cat > "$d/stdin" || gb_fail 1 "cannot write stdin"; fi
`

const scriptTail = `w=
if [ "${GATEBRIDGE_WAKE:-fifo}" = fifo ]; then
	[ -p "$d/wake" ] || mkfifo "$d/wake" 2>/dev/null
	if [ -p "$d/wake" ] && { command exec 3<>"$d/wake"; } 2>/dev/null; then w=1; fi
fi
true > "$d/ready" || gb_fail 1 "cannot publish call"
x=$r/$i
t=${GATEBRIDGE_WAIT_TIMEOUT:-0}; t=$((t*1000)); e=0
if [ -n "$w" ]; then
	k=${GATEBRIDGE_WAKE_CHECK:-1}
	read -t 0 _ < /dev/null 2>/dev/null; [ "$?" -eq 2 ] && k=
	while [ ! -f "$x.exit" ]; do
		if [ -n "$k" ]; then
			# A byte without .exit is the host's heartbeat: it is alive, so
			# the wait timeout starts again.
			if read -r -t "$k" _ <&3; then e=0; else e=$((e+k*1000)); fi
		else
			read -r _ <&3
		fi
		[ "$t" -eq 0 ] || [ "$e" -lt "$t" ] || gb_fail 124 "timed out waiting for the host"
	done
	exec 3<&-
else
	s=1
	while [ ! -f "$x.exit" ]; do
		[ "$t" -eq 0 ] || [ "$e" -lt "$t" ] || gb_fail 124 "timed out waiting for the host"
		case $s in 1) sleep 0.001;; 2) sleep 0.002;; 5) sleep 0.005;; 10) sleep 0.01;; 20) sleep 0.02;; 50) sleep 0.05;; *) sleep 0.1;; esac
		e=$((e+s))
		case $s in 1) s=2;; 2) s=5;; 5) s=10;; 10) s=20;; 20) s=50;; *) s=100;; esac
	done
fi
read -r q < "$x.exit" || q=
case $q in ''|*[!0-9]*) gb_fail 1 "malformed exit code from the host";; esac
if [ -f "$x.text" ]; then
	if [ -s "$x.stdout" ]; then
		while IFS= read -r l; do printf '%s\n' "$l"; done < "$x.stdout"
		[ -z "$l" ] || printf '%s' "$l"
	fi
	if [ -s "$x.stderr" ]; then
		while IFS= read -r l; do printf '%s\n' "$l"; done < "$x.stderr" >&2
		[ -z "$l" ] || printf '%s' "$l" >&2
	fi
else
	[ ! -s "$x.stdout" ] || cat "$x.stdout"
	[ ! -s "$x.stderr" ] || cat "$x.stderr" >&2
fi
: > "$c/$i.done" 2>/dev/null
exit "$q"
`
