package approval

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/internal/hint"
)

// OpenStore is the store at path, or at [DefaultPath] when path is "".
func OpenStore(path string) (*Store, error) {
	if path == "" {
		p, err := DefaultPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	return NewStore(path)
}

// GrantFlags are the words of `gatebridge grants add GATE …`.
type GrantFlags struct {
	Gate string
	// Exact (with IsExact) are the arguments allowed, byte for byte.
	Exact   []string
	IsExact bool
	// Args are "N=RE" (N from 1): argument N must match RE in full;
	// every argument from 1 to the highest N must be given.
	Args []string
	// Any allows any arguments the gate's policy allows.
	Any bool
	// Workspace limits the grant to one workspace ("": every one).
	Workspace string
	// For, when set, makes the grant expire that long from now.
	For time.Duration
}

// Grant is the grant f describes, validated.
func (f GrantFlags) Grant(now time.Time) (Grant, error) {
	g := Grant{Gate: f.Gate, Lifetime: LifeAlways, AnyArgs: f.Any}
	if f.IsExact {
		g.Exact = append([]string{}, f.Exact...)
	} else if len(f.Exact) > 0 {
		return Grant{}, hint.With(fmt.Errorf("grants add: arguments after %s need --exact", f.Gate), "gatebridge grants add GATE --exact -- ARG...")
	}
	if len(f.Args) > 0 {
		p, err := parseArgPatterns(f.Args)
		if err != nil {
			return Grant{}, err
		}
		g.Patterns = p
	}
	if f.Workspace != "" {
		abs, err := filepath.Abs(f.Workspace)
		if err != nil {
			return Grant{}, err
		}
		g.Lifetime, g.Workspace = LifeWorkspace, abs
	}
	if f.For > 0 {
		g.Expires = now.Add(f.For).UTC().Truncate(time.Second)
	}
	if err := g.Validate(); err != nil {
		return Grant{}, hint.With(err, "give one of --exact, --arg N=RE or --any")
	}
	return g, nil
}

// parseArgPatterns turns N=RE words into one pattern per argument.
func parseArgPatterns(flags []string) ([]string, error) {
	byPos := map[int]string{}
	most := 0
	for _, f := range flags {
		n, re, ok := strings.Cut(f, "=")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || i < 1 || i > 4096 {
			return nil, hint.With(fmt.Errorf("grants add: --arg %q: want N=RE with N from 1", f), "e.g. --arg 1=-n --arg 2='[0-9]+'")
		}
		if _, dup := byPos[i]; dup {
			return nil, fmt.Errorf("grants add: argument %d given twice", i)
		}
		byPos[i], most = re, max(most, i)
	}
	out := make([]string, most)
	for i := range out {
		re, ok := byPos[i+1]
		if !ok {
			return nil, hint.With(fmt.Errorf("grants add: no --arg %d (a grant names every argument)", i+1),
				fmt.Sprintf("--arg %d='.*' allows whatever the gate's policy allows there", i+1))
		}
		out[i] = re
	}
	return out, nil
}

// LocalNote is the note the terminal prompt shows under a backend that
// runs commands as the person (local).
const LocalNote = "the local backend runs the command as you: it could edit the grants file itself, so approvals here guide, not guard"

// WithTerminal is the decider of a front end that asks the person at the
// controlling terminal (run, sandbox exec): cfg with a [Terminal] as its
// Approver when a gate of reg may ask and there is a terminal (term is
// then returned, for the caller to close; nil otherwise), and with
// NoOne saying there is none when there is not. note goes under every
// question.
func WithTerminal(cfg Config, reg *gates.Registry, note string) (*Decider, *Terminal) {
	if d := New(cfg); !d.Asks(reg) {
		return d, nil
	}
	term, err := OpenTerminal()
	if err != nil {
		cfg.NoOne = "no terminal to ask on"
		return New(cfg), nil
	}
	term.Note = note
	cfg.Approver = term
	return New(cfg), term
}
