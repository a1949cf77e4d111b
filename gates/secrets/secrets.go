// Package secrets holds the credentials gates use and keeps them out of
// everything the sandbox, a runtime, a log or a person sees.
//
// # Sources
//
// A [Store] knows each secret by name (lower case: [a-z][a-z0-9_]*) and
// where its value comes from ([Source]): gatebridge's own environment
// (captured when the Store is made; [Store.ScrubEnv] then removes those
// variables from the process, so that no environment gatebridge passes on
// holds them), a file (ours, not readable or writable by group or others,
// not a link, outside every directory the sandbox can write; it loses one
// trailing newline), or a command (run at first use, its stdout trimmed,
// kept for the process or for [Source.Refresh]). A secret is read only
// when something asks for it, and values shorter than [MinLen] bytes are
// refused.
//
// # References
//
// Configuration values name a secret as ${secret:NAME} ([Refs],
// [Store.Expand]). Only the places that hand a value to a program or a
// server take them: a command gate's env, an MCP server's env and headers,
// an http rule's headers. [Mentions] finds a reference anywhere else, so
// that a kind can refuse it.
//
// # Redaction
//
// Every value a Store reads is added to its [Redactor] before it is handed
// out: the bridge redacts gate output (streamed or not), call records,
// error texts and the audit log with it, and the output of sandboxed
// commands.
package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/fspath"
)

// MinLen is the shortest value a secret may have: a shorter one would
// redact ordinary text, and be easy to guess.
const MinLen = 8

// Caps on what a source may make gatebridge read, and how long a command
// source may run.
const (
	MaxValueBytes  = 64 << 10
	CommandTimeout = 30 * time.Second
)

// Source is where one secret's value comes from: exactly one of Env, File
// and Command.
type Source struct {
	// Env is a variable of gatebridge's environment.
	Env string
	// File is an absolute path to a file holding the value.
	File string
	// Command is run (no shell) at first use; its stdout, trimmed, is the
	// value.
	Command []string
	// Refresh, for File and Command, reads the value again when it is
	// older; 0 keeps it for the life of the process.
	Refresh time.Duration
}

// String says where the value comes from, for listings (never the value).
func (s Source) String() string {
	switch {
	case s.Env != "":
		return "env " + s.Env
	case s.File != "":
		return "file " + s.File
	case len(s.Command) > 0:
		return "command " + strings.Join(s.Command, " ")
	}
	return "no source"
}

// Error is a problem with one secret. Field is the setting at fault under
// the secret ("env", "file", "command", "refresh"; "" for the secret as a
// whole or its value): a program names its config key with it.
type Error struct {
	Name  string
	Field string
	Err   error
	Help  string
}

func (e *Error) Error() string { return fmt.Sprintf("secret %s: %v", e.Name, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Hint says how to fix it.
func (e *Error) Hint() string { return e.Help }

// ErrUnknown is wrapped by the error for a reference to a name the Store
// does not have.
var ErrUnknown = errors.New("no such secret")

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ValidName reports whether name is a secret's name: [a-z][a-z0-9_]*.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// notSecretEnv are variables a secret cannot come from.
var notSecretEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "TMPDIR": true, "PWD": true,
	"LANG": true, "TERM": true, "XDG_CONFIG_HOME": true, "XDG_RUNTIME_DIR": true, "XDG_CACHE_HOME": true,
}

// Options adjust a Store.
type Options struct {
	// TrustProgram, when set, checks a command source's program (resolved
	// with exec.LookPath) before it runs, with the directories the sandbox
	// can write, and returns the path to run (gates.TrustedCommand).
	TrustProgram func(path string, untrusted []string) (string, error)
}

// Store holds the configured secrets and the values read so far. A nil
// *Store has no secrets. It is safe for concurrent use.
type Store struct {
	opts    Options
	srcs    map[string]Source
	env     map[string]string // captured values of env sources (set ones)
	red     *Redactor
	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one secret's value as last read; its mu serializes reads.
type entry struct {
	mu    sync.Mutex
	value string
	at    time.Time
	ok    bool
}

// New checks srcs (names, one source each, the form of each) and makes a
// Store of them. It reads nothing but the environment: the values of env
// sources are captured now (see [Store.ScrubEnv]). Errors are [*Error]s.
func New(srcs map[string]Source, opts Options) (*Store, error) {
	s := &Store{opts: opts, srcs: map[string]Source{}, env: map[string]string{}, red: NewRedactor(), entries: map[string]*entry{}}
	names := slices.Sorted(maps.Keys(srcs))
	for _, name := range names {
		src := srcs[name]
		bad := func(field, help, format string, a ...any) error {
			return &Error{Name: name, Field: field, Err: fmt.Errorf(format, a...), Help: help}
		}
		if !nameRE.MatchString(name) {
			return nil, bad("", "name secrets with lower-case letters, digits and _, starting with a letter (gh, db_pass)",
				"%q is not a secret name", name)
		}
		n := 0
		for _, set := range []bool{src.Env != "", src.File != "", len(src.Command) > 0} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, bad("", "give exactly one of env (a variable), file (a path) or command (an argv)",
				"%d sources given, want exactly one of env, file, command", n)
		}
		switch {
		case src.Env != "":
			if !envRE.MatchString(src.Env) {
				return nil, bad("env", "name an environment variable, e.g. GITHUB_TOKEN", "%q is not a variable name", src.Env)
			}
			if notSecretEnv[src.Env] || strings.HasPrefix(src.Env, "GATEBRIDGE_") {
				// ScrubEnv would remove it from gatebridge and every program it starts.
				return nil, bad("env", "keep the secret in a variable of its own, e.g. GITHUB_TOKEN",
					"%s is not a secret: gatebridge and the programs it starts need it", src.Env)
			}
			if src.Refresh != 0 {
				return nil, bad("refresh", "drop refresh: gatebridge's environment does not change", "an env secret cannot be refreshed")
			}
			if v, ok := os.LookupEnv(src.Env); ok {
				s.env[name] = v
				if checkValue(v) == nil {
					s.red.Add(name, v)
				}
			}
		case src.File != "":
			if !filepath.IsAbs(src.File) {
				return nil, bad("file", "give an absolute path, e.g. /run/secrets/db_pass", "%q is not an absolute path", src.File)
			}
		default:
			if src.Command[0] == "" || slices.ContainsFunc(src.Command, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
				return nil, bad("command", "give the argv of a program that prints the secret, e.g. [pass, show, aws]", "empty program or a NUL byte")
			}
		}
		if src.Refresh < 0 {
			return nil, bad("refresh", "a duration such as 1h; 0 reads it once", "negative")
		}
		s.srcs[name] = src
	}
	return s, nil
}

// Names returns the secrets' names, sorted.
func (s *Store) Names() []string {
	if s == nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(s.srcs))
	return names
}

// Source returns where the secret name comes from.
func (s *Store) Source(name string) (Source, bool) {
	if s == nil {
		return Source{}, false
	}
	src, ok := s.srcs[name]
	return src, ok
}

// Redactor returns the Store's redactor (nil for a nil Store).
func (s *Store) Redactor() *Redactor {
	if s == nil {
		return nil
	}
	return s.red
}

// EnvNames returns the environment variables the secrets come from,
// sorted.
func (s *Store) EnvNames() []string {
	var out []string
	for _, n := range s.Names() {
		if v := s.srcs[n].Env; v != "" {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// ScrubEnv removes the variables env sources come from ([Store.EnvNames])
// from this process's environment, so that no program gatebridge starts
// (a command in the local backend, a stdio MCP server, a secret's own
// command) inherits them. A gate that references such a secret gets it
// through its own env entry. Call it once the Store is made, before
// anything is started.
func (s *Store) ScrubEnv() {
	for _, v := range s.EnvNames() {
		os.Unsetenv(v)
	}
}

// Get returns the value of the secret name, reading it if it was not read
// yet (or its Refresh has passed). untrusted are the directories the
// sandbox can write: a file source, or a command source's program, must
// not be in one. Errors are [*Error]s; they never hold the value.
func (s *Store) Get(ctx context.Context, name string, untrusted []string) (string, error) {
	src, ok := s.Source(name)
	if !ok {
		help := "declare it under secrets: (see docs/broker.md)"
		if len(s.Names()) > 0 {
			help = "the secrets are " + strings.Join(s.Names(), ", ") + "; or declare it under secrets: (see docs/broker.md)"
		}
		return "", &Error{Name: name, Err: ErrUnknown, Help: help}
	}
	if src.Env != "" {
		v, ok := s.env[name]
		if !ok {
			return "", &Error{Name: name, Field: "env", Err: fmt.Errorf("%s is not set in gatebridge's environment", src.Env),
				Help: "export " + src.Env + " before starting gatebridge"}
		}
		if err := checkValue(v); err != nil {
			return "", &Error{Name: name, Err: err, Help: "a secret must be at least 8 bytes, with no NUL byte"}
		}
		return v, nil
	}
	if src.File != "" {
		// The place is checked at every use: a registry for another
		// workspace may cover it.
		if err := checkPlace(src.File, untrusted); err != nil {
			return "", &Error{Name: name, Field: "file", Err: err, Help: "keep secret files outside the workspace, the writable root and the session directories"}
		}
	}
	s.mu.Lock()
	e := s.entries[name]
	if e == nil {
		e = &entry{}
		s.entries[name] = e
	}
	s.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok && (src.Refresh == 0 || time.Since(e.at) < src.Refresh) {
		return e.value, nil
	}
	var v string
	var err error
	if src.File != "" {
		v, err = readFile(src.File)
		if err != nil {
			return "", &Error{Name: name, Field: "file", Err: err,
				Help: "the file must be a regular file (not a link) you own, mode 0600 or 0400: chmod go= " + src.File}
		}
	} else {
		v, err = s.runCommand(ctx, src.Command, untrusted)
		if err != nil {
			return "", &Error{Name: name, Field: "command", Err: err, Help: "run the command yourself to see why (gatebridge does not show its output); it must print the secret on stdout and exit 0"}
		}
	}
	if err := checkValue(v); err != nil {
		return "", &Error{Name: name, Err: err, Help: "a secret must be at least 8 bytes, with no NUL byte"}
	}
	s.red.Add(name, v) // before anyone can use it
	e.value, e.at, e.ok = v, time.Now(), true
	return v, nil
}

// checkValue refuses a value too short to redact safely, or with a NUL
// byte (no environment can carry it).
func checkValue(v string) error {
	if len(v) < MinLen {
		return fmt.Errorf("the value is %d bytes, shorter than %d: it would redact ordinary text", len(v), MinLen)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return errors.New("the value holds a NUL byte")
	}
	return nil
}

// checkPlace refuses a path in (or through a link into) a directory the
// sandbox can write.
func checkPlace(p string, untrusted []string) error {
	clean := filepath.Clean(p)
	real := clean
	if d, err := filepath.EvalSymlinks(filepath.Dir(clean)); err == nil {
		real = filepath.Join(d, filepath.Base(clean))
	}
	if ru := fspath.UntrustedDir(untrusted, clean, real); ru != "" {
		return fmt.Errorf("%s is inside %s, which the sandbox can write", p, ru)
	}
	return nil
}

// readFile reads a secret file: not a link, a regular file with one name,
// ours, not readable or writable by group or others, capped.
func readFile(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("%s is a symbolic link (refused)", p)
		}
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s has mode %v: group or others can read or write it", p, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if int(st.Uid) != os.Geteuid() {
			return "", fmt.Errorf("%s is owned by uid %d, not by gatebridge's (%d)", p, st.Uid, os.Geteuid())
		}
		if st.Nlink != 1 {
			return "", fmt.Errorf("%s has %d names (hard links): it must have one", p, st.Nlink)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxValueBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxValueBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", p, MaxValueBytes)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// runCommand runs a command source in / with gatebridge's (scrubbed)
// environment and returns its stdout, trimmed.
func (s *Store) runCommand(ctx context.Context, argv []string, untrusted []string) (string, error) {
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return "", err
	}
	if s.opts.TrustProgram != nil {
		if prog, err = s.opts.TrustProgram(prog, untrusted); err != nil {
			return "", err
		}
	} else if err := checkPlace(prog, untrusted); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = "/"
	out := &capBuffer{max: MaxValueBytes}
	// Its stderr is not kept: a failing secret command may print the
	// value, or part of one no redactor would recognize ("token
	// abc123… expired"), and its error reaches logs and doctor's output.
	cmd.Stdout, cmd.Stderr = out, nil
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s: no answer within %v", argv[0], CommandTimeout)
		}
		return "", fmt.Errorf("%s: %v (its output is not shown: it may hold the secret)", argv[0], err)
	}
	if out.over {
		return "", fmt.Errorf("%s printed more than %d bytes", argv[0], MaxValueBytes)
	}
	return strings.TrimSpace(out.String()), nil
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *capBuffer) Write(p []byte) (int, error) {
	room := b.max - b.Len()
	if len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// Check reads every secret (running command sources) and returns, by
// name, nil or why it does not resolve; for `gatebridge doctor`.
func (s *Store) Check(ctx context.Context, untrusted []string) map[string]error {
	out := map[string]error{}
	for _, n := range s.Names() {
		_, err := s.Get(ctx, n, untrusted)
		out[n] = err
	}
	return out
}
