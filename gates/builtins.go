package gates

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
)

// Defaults for [Options] fields left zero.
const (
	DefaultMaxFileBytes       = 4 << 20 // read_file, write_file; equal to the bridge's default output cap
	DefaultMaxSearchMatches   = 200
	DefaultMaxSearchFiles     = 20000
	DefaultMaxSearchFileBytes = 4 << 20 // as documented for the CLI (it was 1 MiB here: the defaults had drifted)
	DefaultMaxDirEntries      = 10000
)

// Options configures the built-in gates.
//
// Relative paths given to file gates start at the caller's working
// directory ([Call.Cwd]) when it lies in the workspace, at the workspace
// root when the caller did not send one, and are refused (exit 126) when
// it lies outside. Absolute paths are accepted only when they lie under Root (or WritableRoot for
// write_file), under the real path of that directory, or under SandboxRoot
// (SandboxWritableRoot), and are then made relative; any other absolute path
// is denied with exit 126, as is every path that climbs out with ".." or
// reaches outside through a symlink. Symlinks inside the root are followed
// only when their target is relative and stays inside; absolute symlink
// targets are refused, even when they point inside.
type Options struct {
	// Root is the workspace that read_file, list_dir and search see. Required.
	Root string
	// SandboxRoot is where the sandbox sees Root (e.g. "/workspace"), so the
	// gates also accept absolute paths under it. Optional.
	SandboxRoot string
	// WritableRoot is the tree write_file writes into; empty means
	// write_file is not provided. It may equal Root. write_file never
	// follows a symlink in it (see docs/security.md), and as root it
	// gives what it creates to the owner of WritableRoot.
	WritableRoot string
	// SandboxWritableRoot is where the sandbox sees WritableRoot. Optional.
	SandboxWritableRoot string
	// ProtectedPaths are paths relative to WritableRoot that write_file
	// refuses (exit 126), with everything below them: .git, say, whose
	// config and hooks host tools run (sandbox.protected_paths). The
	// reading gates do not refuse them.
	ProtectedPaths []string
	// MaxFileBytes caps a whole-file read_file (larger files need --offset
	// or --limit), the bytes one ranged read prints, and what write_file
	// accepts. 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxSearchMatches is how many matches search prints before it only
	// counts the rest. 0 means DefaultMaxSearchMatches.
	MaxSearchMatches int
	// MaxSearchFiles caps the files one search reads. 0 means
	// DefaultMaxSearchFiles.
	MaxSearchFiles int
	// MaxSearchFileBytes: search skips larger files. 0 means
	// DefaultMaxSearchFileBytes.
	MaxSearchFileBytes int64
	// MaxDirEntries caps the entries read from one directory by list_dir
	// and search. 0 means DefaultMaxDirEntries.
	MaxDirEntries int
}

func (o *Options) setDefaults() error {
	if o.MaxFileBytes < 0 || o.MaxSearchMatches < 0 || o.MaxSearchFiles < 0 ||
		o.MaxSearchFileBytes < 0 || o.MaxDirEntries < 0 {
		return fmt.Errorf("gates: options: limits must not be negative")
	}
	o.MaxFileBytes = cmp.Or(o.MaxFileBytes, DefaultMaxFileBytes)
	o.MaxSearchMatches = cmp.Or(o.MaxSearchMatches, DefaultMaxSearchMatches)
	o.MaxSearchFiles = cmp.Or(o.MaxSearchFiles, DefaultMaxSearchFiles)
	o.MaxSearchFileBytes = cmp.Or(o.MaxSearchFileBytes, DefaultMaxSearchFileBytes)
	o.MaxDirEntries = cmp.Or(o.MaxDirEntries, DefaultMaxDirEntries)
	return nil
}

// Builtins returns the built-in gates: read_file, list_dir, search,
// write_file (only when o.WritableRoot is set), submit and gb_echo.
func Builtins(o Options) ([]Gate, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	ws, err := newWorkspace("root", o.Root, o.SandboxRoot)
	if err != nil {
		return nil, err
	}
	gs := []Gate{
		newReadFile(ws, o),
		newListDir(ws, o),
		newSearch(ws, o),
	}
	if o.WritableRoot != "" {
		wws, err := newWorkspace("writable_root", o.WritableRoot, o.SandboxWritableRoot)
		if err != nil {
			return nil, err
		}
		gs = append(gs, newWriteFile(wws, o))
	}
	gs = append(gs, newSubmit(), newEcho())
	return gs, nil
}

// RegisterBuiltins adds [Builtins] to r. It registers nothing when the
// options are invalid; a name already taken in r fails after the gates
// before it were added.
func RegisterBuiltins(r *Registry, o Options) error {
	gs, err := Builtins(o)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if err := r.Register(g); err != nil {
			return err
		}
	}
	return nil
}

// builtin is the common shape of the built-in gates.
type builtin struct {
	spec Spec
	args argSpec
	run  func(ctx context.Context, c *Call, p parsedArgs) (int, error)
}

var _ Gate = (*builtin)(nil)

func (b *builtin) Spec() Spec { return b.spec }

// OwnsHelp implements [HelpOwner]: gb_echo prints --help as it is.
func (b *builtin) OwnsHelp(string) bool { return b.args.ownsHelp }

func (b *builtin) Call(ctx context.Context, c *Call) (int, error) {
	p, err := b.args.parse(c.Args)
	if err != nil {
		return 0, err
	}
	return b.run(ctx, c, p)
}

func newBuiltin(spec Spec, args argSpec, run func(context.Context, *Call, parsedArgs) (int, error)) *builtin {
	args.gate = spec.Name
	args.usage = spec.Usage
	spec.DashDash = !args.raw
	return &builtin{spec: spec, args: args, run: run}
}

func stdout(c *Call) io.Writer {
	if c.Stdout == nil {
		return io.Discard
	}
	return c.Stdout
}

func stderr(c *Call) io.Writer {
	if c.Stderr == nil {
		return io.Discard
	}
	return c.Stderr
}

func newSubmit() Gate {
	return newBuiltin(Spec{
		Name:    "submit",
		Summary: "Submit the final answer; prints nothing.",
		Usage:   "submit [ANSWER...]",
		Params: []Param{{
			Name:        "answer",
			Description: "The answer; arguments are joined with single spaces. With no arguments, stdin is the answer, byte for byte. A JSON object argument is an answer like any other.",
			Variadic:    true,
		}},
		Stdin:   StdinIfNoArgs,
		RawArgs: true,
	}, argSpec{raw: true, max: -1}, func(_ context.Context, c *Call, p parsedArgs) (int, error) {
		answer := strings.Join(p.pos, " ")
		if len(p.pos) == 0 {
			answer = string(c.Stdin)
		}
		if c.Results != nil {
			c.Results.SetResult(ResultAnswer, answer)
		}
		return ExitOK, nil
	})
}

func newEcho() Gate {
	return newBuiltin(Spec{
		Name:    "gb_echo",
		Summary: "Print the arguments joined with single spaces and a newline, or copy stdin when there are none; for testing the bridge.",
		Usage:   "gb_echo [ARG...]",
		Params: []Param{{
			Name:        "arg",
			Description: "Printed byte for byte; options (--help too) and JSON are not parsed.",
			Variadic:    true,
		}},
		Stdin:   StdinIfNoArgs,
		RawArgs: true,
	}, argSpec{raw: true, max: -1, ownsHelp: true}, func(_ context.Context, c *Call, p parsedArgs) (int, error) {
		var err error
		if len(p.pos) == 0 {
			_, err = stdout(c).Write(c.Stdin)
		} else {
			_, err = io.WriteString(stdout(c), strings.Join(p.pos, " ")+"\n")
		}
		if err != nil {
			return 0, fmt.Errorf("gb_echo: write: %w", err)
		}
		return ExitOK, nil
	})
}
