// Package wrappers generates the POSIX sh scripts that stand in for gates
// inside the sandbox. The mailbox format they speak (v2) is owned by
// package [mailbox]; every file and variable name in a script comes from
// there.
//
// A wrapper claims a call id (mkdir calls/<id>), writes the gate name and
// its arguments as one NUL-separated argv file (one printf builtin), stdin
// when the gate takes it, and last an empty ready marker; then it waits
// for responses/<id>.exit, prints the answer and exits with its code. A
// small answer is carried inside the exit file and printed with builtins;
// a large or binary one is in .stdout/.stderr and printed with cat. The
// script runs under every POSIX shell Debian packages (dash, bash, busybox
// ash, mksh, yash, ksh93, zsh, posh), and under zsh in its native mode too
// (`zsh "$(command -v gate)"`: the script switches it to sh emulation
// first), and costs two process starts per call
// (sh and mkdir; mkfifo only when the host has not made the FIFO yet). Call
// ids come from the kernel's random uuid (unique across PID namespaces);
// mkdir without -p claims the id atomically.
//
// # Waiting
//
// With GATEBRIDGE_WAKE=fifo (the default) the wrapper opens its wake FIFO
// read-write before publishing, so it never blocks on open, and then blocks
// in the read builtin: no CPU until the host writes. Shells with `read -t`
// (bash, busybox, mksh, ksh93, zsh; probed quietly) also re-check every GATEBRIDGE_WAKE_CHECK seconds, so a
// lost wake-up costs latency, never a hang. With GATEBRIDGE_WAKE=poll (or
// when mkfifo fails) the wrapper polls for the .exit file with a backoff
// from 1 ms to 100 ms. It gives up with exit 124 when polling after
// GATEBRIDGE_WAIT_TIMEOUT seconds (0 = never), and under a shell with
// `read -t` after that many seconds without a byte from the host (the host
// writes a heartbeat byte to every waiting call's FIFO each rescan
// interval, so a long queue or a slow gate does not count); under dash (no
// `read -t`), yash and posh the FIFO wait ends only when the host writes. A wrapper that
// goes away while its gate runs closes the FIFO; the host notices and
// cancels the gate.
//
// Generated text never contains the gate's description or usage verbatim:
// only a sanitized one-line summary inside a comment, so no description can
// inject shell code.
package wrappers

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// Spec is what a wrapper needs to know about a gate.
type Spec struct {
	Name    string
	Summary string // shown in a comment; sanitized
	Stdin   mailbox.StdinMode
}

// Script returns the wrapper script for s.
func Script(s Spec) ([]byte, error) {
	if err := mailbox.ValidateName(s.Name); err != nil {
		return nil, err
	}
	t := templates()
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "# gatebridge wrapper for gate %s (generated, do not edit)\n", s.Name)
	if sum := sanitizeComment(s.Summary); sum != "" {
		fmt.Fprintf(&b, "# %s\n", sum)
	}
	fmt.Fprintf(&b, "g='%s'\n", s.Name) // name is [A-Za-z0-9_.+-]: safe in single quotes
	b.WriteString(t.head)
	switch s.Stdin {
	case mailbox.StdinAlways:
		b.WriteString(t.stdinAlways)
	case mailbox.StdinIfNoArgs:
		b.WriteString(t.stdinIfNoArgs)
	case mailbox.StdinIfAtDash:
		b.WriteString(t.stdinIfAtDash)
	}
	b.WriteString(t.tail)
	return b.Bytes(), nil
}

// WriteDir writes one executable wrapper per spec into dir (mode 0755),
// each as a temp file renamed into place, so a shell never runs a half
// written wrapper.
func WriteDir(dir string, specs []Spec) error {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("wrappers: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	return WriteDirAt(dfd, specs)
}

// WriteDirAt is [WriteDir] into the directory dirfd: every file is
// written relative to it, following no link ([hostilefs.WriteFileAt]).
func WriteDirAt(dirfd int, specs []Spec) error {
	return eachScript(specs, func(name string, script []byte) error {
		return hostilefs.WriteFileAt(dirfd, name, script, 0o755)
	})
}

// CreateDir writes one executable wrapper per spec into dir (mode 0755),
// a directory that no command can reach yet (a new session's bin/): each
// file is created at its name, exclusively and following no link, and
// written once. Half the system calls of [WriteDir], whose renames only
// matter once a shell may run the wrappers; and it goes by dir's file
// descriptor with bare system calls (open, write, fchmod, close per
// wrapper), since it runs for every session a server opens.
func CreateDir(dir string, specs []Spec) error {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("wrappers: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	return CreateDirAt(dfd, specs)
}

// CreateDirAt is [CreateDir] into the directory dirfd.
func CreateDirAt(dirfd int, specs []Spec) error {
	return eachScript(specs, func(name string, script []byte) error {
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o700)
		if err != nil {
			return err
		}
		werr := writeAll(fd, script)
		if err := firstErr(werr, unix.Fchmod(fd, 0o755), unix.Close(fd)); err != nil { // Fchmod: umask
			unix.Unlinkat(dirfd, name, 0)
			return err
		}
		return nil
	})
}

// writeAll writes b to fd, however many writes that takes.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// eachScript checks specs (no name twice) and calls write with each
// wrapper's name and script.
func eachScript(specs []Spec, write func(name string, script []byte) error) error {
	seen := make(map[string]bool, len(specs))
	for _, s := range specs {
		if seen[s.Name] {
			return fmt.Errorf("wrappers: duplicate gate name %q", s.Name)
		}
		seen[s.Name] = true
		script, err := cachedScript(s)
		if err != nil {
			return fmt.Errorf("wrappers: %w", err)
		}
		if err := write(s.Name, script); err != nil {
			return fmt.Errorf("wrappers: write %s: %w", s.Name, err)
		}
	}
	return nil
}

// scripts keeps the scripts made lately: every session of a server writes
// the same few, and making one allocates about 15 KB. Bounded: it starts
// over when full.
var scripts struct {
	sync.Mutex
	m map[Spec][]byte
}

const maxCachedScripts = 256

// cachedScript is [Script] from the cache. The bytes are shared: only
// write them.
func cachedScript(s Spec) ([]byte, error) {
	scripts.Lock()
	b, ok := scripts.m[s]
	scripts.Unlock()
	if ok {
		return b, nil
	}
	b, err := Script(s)
	if err != nil {
		return nil, err
	}
	scripts.Lock()
	if scripts.m == nil || len(scripts.m) >= maxCachedScripts {
		scripts.m = make(map[Spec][]byte)
	}
	scripts.m[s] = b
	scripts.Unlock()
	return b, nil
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

type scriptParts struct{ head, stdinAlways, stdinIfNoArgs, stdinIfAtDash, tail string }

// templates fills the script text with the mailbox's names.
var templates = sync.OnceValue(func() scriptParts {
	r := strings.NewReplacer(
		"@CALLS_ENV@", mailbox.EnvCallsDir, "@RESP_ENV@", mailbox.EnvResponsesDir,
		"@WAKE_ENV@", mailbox.EnvWake, "@WAIT_ENV@", mailbox.EnvWaitTimeout, "@CHECK_ENV@", mailbox.EnvWakeCheck,
		"@CALLS@", mailbox.DirCalls, "@RESPONSES@", mailbox.DirResponses,
		"@ARGV@", mailbox.FileArgv, "@STDIN@", mailbox.FileStdin, "@WAKE@", mailbox.FileWake, "@READY@", mailbox.FileReady, "@CANCEL@", mailbox.FileCancel,
		"@EXIT@", mailbox.ExtExit, "@STREAM@", mailbox.ExtStream, "@STDOUT@", mailbox.ExtStdout, "@STDERR@", mailbox.ExtStderr, "@ACK@", mailbox.AckSuffix,
		"@FIFO@", mailbox.WakeFIFO, "@SLOT@", mailbox.SlotPrefix, "@INLINE@", mailbox.ModeInline,
		"@O@", string(rune(mailbox.LineStdout)), "@OP@", string(rune(mailbox.LineStdoutPartial)),
		"@E@", string(rune(mailbox.LineStderr)), "@EP@", string(rune(mailbox.LineStderrPartial)),
	)
	return scriptParts{r.Replace(scriptHead), r.Replace(stdinAlways), r.Replace(stdinIfNoArgs), r.Replace(stdinIfAtDash), r.Replace(scriptTail)}
})

// The script body. Variables are short and prefixed to stay out of the way;
// everything except mkdir, mkfifo (and cat for stdin or big output) is a
// builtin in every shell we support.
const scriptHead = `# zsh run by name (zsh "$(command -v gate)") is in its native mode, where
# a glob that matches nothing is an error and words are not split: be sh.
[ -z "${ZSH_VERSION-}" ] || emulate -R sh 2>/dev/null
c=${@CALLS_ENV@:-${0%/*}/../@CALLS@}
r=${@RESP_ENV@:-${0%/*}/../@RESPONSES@}
gb_fail() { printf 'gatebridge: %s: %s\n' "$g" "$2" >&2; exit "$1"; }
# Work from inside calls/ (the caller's directory is sent, not used): a
# relative path skips the walk from /, which under a fuse-overlayfs docker
# root costs a FUSE lookup per path (38 us against 6 here).
q=${PWD:-} ca=$c
case $q in /*)
	case $c in /*) ;; *) c=$q/$c;; esac
	case $r in /*) ;; *) r=$q/$r;; esac
esac
case $c in /*) if cd "$c" 2>/dev/null; then
	case $r in "${c%/*}/@RESPONSES@") r=../@RESPONSES@;; esac
	c=.
fi;; esac
# Claim a call slot the host prepared (with its wake FIFO) by creating its
# argv exclusively (set -C: O_EXCL), with no process start; when none is
# free, make a call directory.
d= sl= si=
if [ -z "${GATEBRIDGE_NO_SLOT:-}" ]; then
	set -C
	for d in "$c"/@SLOT@*; do
		# A slot is a real directory holding the host's FIFO: skip links
		# and anything else a command left under a slot-like name.
		if [ ! -L "$d" ] && [ -p "$d/@WAKE@" ]; then
			{ printf '%s\0' "$q" "$g" "$@" > "$d/@ARGV@"; } 2>/dev/null && break
		fi
		d=
	done
	set +C
fi
if [ -n "$d" ]; then
	i=${d##*/} sl=1
else
	if ! { read -r i < /proc/sys/kernel/random/uuid; } 2>/dev/null || [ -z "$i" ]; then
		i=p$$-${PPID:-0}-$#
	fi
	n=0
	until mkdir "$c/$i" 2>/dev/null; do
		[ -d "$c" ] || gb_fail 1 "calls dir $ca does not exist (is the session mounted? set @CALLS_ENV@)"
		n=$((n+1)); [ "$n" -lt 20 ] || gb_fail 1 "cannot create a call in $ca"
		i=$i-$n
	done
	d=$c/$i
	printf '%s\0' "$q" "$g" "$@" > "$d/@ARGV@" || gb_fail 1 "cannot write the arguments"
fi
`

const stdinAlways = `if [ ! -t 0 ]; then si=1; cat > "$d/@STDIN@" || gb_fail 1 "cannot write stdin"; fi
`

const stdinIfNoArgs = `if [ "$#" -eq 0 ] && [ ! -t 0 ]; then si=1; cat > "$d/@STDIN@" || gb_fail 1 "cannot write stdin"; fi
`

// stdinIfAtDash sends stdin when an argument is exactly @- (a loop of
// builtins: no process start).
const stdinIfAtDash = `for gb_a do
	if [ "$gb_a" = @- ]; then
		if [ ! -t 0 ]; then si=1; cat > "$d/@STDIN@" || gb_fail 1 "cannot write stdin"; fi
		break
	fi
done
`

const scriptTail = `w=
if [ "${@WAKE_ENV@:-@FIFO@}" = @FIFO@ ]; then
	[ -p "$d/@WAKE@" ] || mkfifo "$d/@WAKE@" 2>/dev/null
	if [ -p "$d/@WAKE@" ] && { command exec 3<>"$d/@WAKE@"; } 2>/dev/null; then w=1; fi
fi
if [ -z "$w" ]; then
	# Polling: a wrapper stopped by a signal tells the host (it cancels
	# the gate), then dies of the signal as any command would (130, 143,
	# 129, 141 to the caller). Waiting on the FIFO needs no trap: the
	# host sees that no one holds it any more (and yash's read would
	# defer a trapped signal until the answer came).
	gb_sig() { : > "$d/@CANCEL@" 2>/dev/null; trap - "$1"; kill -s "$1" $$; exit "$2"; }
	trap 'gb_sig INT 130' INT; trap 'gb_sig TERM 143' TERM; trap 'gb_sig HUP 129' HUP; trap 'gb_sig PIPE 141' PIPE
fi
if ! { command : > "$d/@READY@"; } 2>/dev/null; then
	# A slot that cannot be published (the host dropped it meanwhile)
	# is given up: start over in a directory of our own, unless stdin
	# was already read into it.
	[ -z "$sl" ] || [ -n "$si" ] || { cd "$q" 2>/dev/null; GATEBRIDGE_NO_SLOT=1 exec "$0" "$@"; }
	gb_fail 1 "cannot publish call"
fi
x=$r/$i
t=${@WAIT_ENV@:-0}; t=$((t*1000)); e=0
gb_line() {
	case $1 in
	@O@*) printf '%s\n' "${1#?}";;
	@E@*) printf '%s\n' "${1#?}" >&2;;
	@OP@*) printf '%s' "${1#?}";;
	@EP@*) printf '%s' "${1#?}" >&2;;
	esac
}
# A gate that runs long streams its output to $x@STREAM@ (the answer's
# line format): print what is there, keeping a line the host is still
# writing for the next turn.
so=; p=
gb_follow() {
	if [ -z "$so" ]; then
		[ -f "$x@STREAM@" ] || return 0
		{ command exec 4< "$x@STREAM@"; } 2>/dev/null || return 0
		so=1
	fi
	while IFS= read -r l <&4; do gb_line "$p$l"; p=; done
	p=$p$l
}
if [ -n "$w" ]; then
	# read -t is not POSIX: probed on a here-document, quietly, no fork.
	k=
	if read -r -t 1 _ 2>/dev/null <<GBEOF
x
GBEOF
	then k=${@CHECK_ENV@:-1}; fi
	while [ ! -f "$x@EXIT@" ]; do
		gb_follow
		if [ -n "$k" ]; then
			# A byte without the exit file is the host's heartbeat: it is
			# alive, so the wait timeout starts again.
			if read -r -t "$k" _ <&3; then e=0; else e=$((e+k*1000)); fi
		else
			read -r _ <&3
		fi
		[ "$t" -eq 0 ] || [ "$e" -lt "$t" ] || gb_fail 124 "timed out waiting for the host"
	done
	exec 3<&-
else
	s=1
	while [ ! -f "$x@EXIT@" ]; do
		gb_follow
		[ "$t" -eq 0 ] || [ "$e" -lt "$t" ] || gb_fail 124 "timed out waiting for the host"
		case $s in 1) z=0.001;; 2) z=0.002;; 5) z=0.005;; 10) z=0.01;; 20) z=0.02;; 50) z=0.05;; *) z=0.1;; esac
		# wait, unlike a foreground sleep, returns at once for a trapped
		# signal; the sleep must not hold the caller's stdout open.
		sleep "$z" </dev/null >/dev/null 2>&1 & wait $!
		e=$((e+s))
		case $s in 1) s=2;; 2) s=5;; 5) s=10;; 10) s=20;; 20) s=50;; *) s=100;; esac
	done
fi
gb_follow
{
	read -r q || q=
	case $q in ''|*[!0-9]*) gb_fail 1 "malformed exit code from the host";; esac
	read -r m || m=
	if [ "$m" = @INLINE@ ]; then
		while IFS= read -r l; do gb_line "$l"; done
	else
		[ ! -s "$x@STDOUT@" ] || cat "$x@STDOUT@"
		[ ! -s "$x@STDERR@" ] || cat "$x@STDERR@" >&2
	fi
} < "$x@EXIT@"
: > "$c/$i@ACK@" 2>/dev/null
exit "$q"
`
