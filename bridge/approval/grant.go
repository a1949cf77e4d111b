package approval

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/internal/lossless"
)

// Setting is a gate's approval setting (approval: in the config).
type Setting string

// Settings a gate may have.
const (
	Never Setting = "never" // run without asking (the default)
	Ask   Setting = "ask"   // ask before each call, unless a grant allows it
	Deny  Setting = "deny"  // refuse every call; no grant allows it
)

// ParseSetting reads a setting as written in the config; "" is [Never].
func ParseSetting(s string) (Setting, error) {
	switch Setting(s) {
	case "", Never:
		return Never, nil
	case Ask, Deny:
		return Setting(s), nil
	}
	return "", fmt.Errorf("%q is not never, ask or deny", s)
}

// Lifetime is how long a grant lasts.
type Lifetime string

// Lifetimes of a grant. Call and Session grants are never stored.
const (
	LifeCall      Lifetime = "call"      // this one call
	LifeSession   Lifetime = "session"   // the rest of this session (sandbox)
	LifeWorkspace Lifetime = "workspace" // calls from sandboxes of one workspace
	LifeAlways    Lifetime = "always"    // every call of the gate, anywhere
)

// Grant allows calls of one gate without asking. Exactly one scope is
// set: Exact (these arguments, byte for byte), Patterns (as many
// arguments as patterns, each matching its anchored RE2 pattern in full)
// or AnyArgs (whatever the gate's argument policy allows). A grant never
// widens the policy: the gate still checks its arguments.
type Grant struct {
	ID   string `yaml:"id" json:"id"`
	Gate string `yaml:"gate" json:"gate"`
	// Exact arguments; ExactBase64 holds those that are not UTF-8 (the
	// lossless rule: nil for the others).
	Exact       []string `yaml:"exact,omitempty" json:"exact,omitempty"`
	ExactBase64 [][]byte `yaml:"-" json:"exact_base64,omitempty"`
	// ExactBase64Text is ExactBase64 in the file: standard base64, ""
	// for an argument that is UTF-8.
	ExactBase64Text []string `yaml:"exact_base64,omitempty" json:"-"`
	Patterns        []string `yaml:"patterns,omitempty" json:"patterns,omitempty"`
	AnyArgs         bool     `yaml:"any_args,omitempty" json:"any_args,omitempty"`
	Lifetime        Lifetime `yaml:"lifetime" json:"lifetime"`
	// Workspace is the absolute workspace a LifeWorkspace grant is for.
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
	// Session is the session a LifeSession grant is for (never stored).
	Session string    `yaml:"-" json:"session,omitempty"`
	Created time.Time `yaml:"created" json:"created"`
	Expires time.Time `yaml:"expires,omitempty" json:"expires,omitempty"`

	res []*regexp.Regexp // compiled Patterns
}

// maxPatternBytes bounds one pattern (RE2 is linear, but a pattern is
// compiled for every call).
const maxPatternBytes = 4096

// Validate checks g and compiles its patterns.
func (g *Grant) Validate() error {
	if g.Gate == "" {
		return errors.New("grant names no gate")
	}
	scopes := 0
	if g.Exact != nil {
		scopes++
	}
	if g.Patterns != nil {
		scopes++
	}
	if g.AnyArgs {
		scopes++
	}
	if scopes != 1 {
		return fmt.Errorf("grant for %s: give one scope: exact arguments, a pattern per argument, or any arguments", g.Gate)
	}
	switch g.Lifetime {
	case LifeCall, LifeSession, LifeAlways:
	case LifeWorkspace:
		if !filepath.IsAbs(g.Workspace) {
			return fmt.Errorf("grant for %s: a workspace grant needs an absolute workspace, got %s", g.Gate, lossless.Quote(g.Workspace))
		}
	default:
		return fmt.Errorf("grant for %s: lifetime %q is not call, session, workspace or always", g.Gate, g.Lifetime)
	}
	for _, a := range g.Exact {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("grant for %s: an argument contains a NUL byte", g.Gate)
		}
	}
	g.res = g.res[:0]
	for i, p := range g.Patterns {
		if len(p) > maxPatternBytes {
			return fmt.Errorf("grant for %s: pattern %d is over %d bytes", g.Gate, i+1, maxPatternBytes)
		}
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return fmt.Errorf("grant for %s: pattern %d: %v", g.Gate, i+1, err)
		}
		g.res = append(g.res, re)
	}
	return nil
}

// Matches reports whether g allows gate with args, in session and
// workspace, at now. g must have been validated.
func (g *Grant) Matches(gate string, args []string, session, workspace string, now time.Time) bool {
	if g.Gate != gate || (!g.Expires.IsZero() && !now.Before(g.Expires)) {
		return false
	}
	switch g.Lifetime {
	case LifeSession:
		if g.Session == "" || g.Session != session {
			return false
		}
	case LifeWorkspace:
		if workspace == "" || filepath.Clean(workspace) != filepath.Clean(g.Workspace) {
			return false
		}
	}
	switch {
	case g.AnyArgs:
		return true
	case g.Exact != nil:
		if len(args) != len(g.Exact) {
			return false
		}
		for i, a := range args {
			if a != g.Exact[i] {
				return false
			}
		}
		return true
	default:
		if len(args) != len(g.res) || len(g.res) != len(g.Patterns) {
			return false
		}
		for i, a := range args {
			if !g.res[i].MatchString(a) {
				return false
			}
		}
		return true
	}
}

// Describe says in words what g allows, e.g.
//
//	allows git_log with exactly the arguments "-n" "5" in workspace /src/app, until 2026-11-25 16:00 UTC
func (g *Grant) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "allows %s", lossless.Quote(g.Gate))
	switch {
	case g.AnyArgs:
		b.WriteString(" with any arguments its policy allows")
	case g.Exact != nil && len(g.Exact) == 0:
		b.WriteString(" with no arguments")
	case g.Exact != nil:
		b.WriteString(" with exactly the arguments")
		for _, a := range g.Exact {
			b.WriteString(" " + showArg(a))
		}
	case len(g.Patterns) == 0:
		b.WriteString(" with no arguments")
	default:
		fmt.Fprintf(&b, " with %d argument%s matching", len(g.Patterns), plural(len(g.Patterns)))
		for _, p := range g.Patterns {
			b.WriteString(" " + showArg(p))
		}
		b.WriteString(" (each in full, and within its policy)")
	}
	switch g.Lifetime {
	case LifeCall:
		b.WriteString(", for one call")
	case LifeSession:
		b.WriteString(", for this session")
	case LifeWorkspace:
		b.WriteString(" in workspace " + lossless.Quote(g.Workspace))
	case LifeAlways:
		b.WriteString(" in every workspace")
	}
	if !g.Expires.IsZero() {
		b.WriteString(", until " + g.Expires.UTC().Format("2006-01-02 15:04 MST"))
	}
	return b.String()
}

// maxShown is how many bytes of one argument a person is shown; the rest
// is cut and its length said.
const maxShown = 120

// showArg is an argument as a person sees it: quoted (control characters,
// escape sequences, \r, newlines and bytes that are not UTF-8 escaped:
// internal/lossless), cut past maxShown bytes with its length.
func showArg(a string) string {
	if len(a) > maxShown {
		return fmt.Sprintf("%s (%d bytes)", lossless.QuoteCap(a, maxShown), len(a))
	}
	return lossless.Quote(a)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// newID returns a fresh grant id: "g-" and 8 hex digits.
func newID() string {
	var b [4]byte
	rand.Read(b[:])
	return "g-" + hex.EncodeToString(b[:])
}

// storable prepares g for the file: the exact bytes of arguments that are
// not UTF-8 go to ExactBase64 (YAML holds only UTF-8).
func (g *Grant) storable() {
	g.ExactBase64, g.ExactBase64Text = nil, nil
	if lossless.List(g.Exact) != nil {
		shown := make([]string, len(g.Exact))
		g.ExactBase64Text = make([]string, len(g.Exact))
		for i, a := range g.Exact {
			shown[i] = strings.ToValidUTF8(a, "\uFFFD")
			if b := lossless.Bytes(a); b != nil {
				g.ExactBase64Text[i] = base64.StdEncoding.EncodeToString(b)
			}
		}
		g.Exact = shown
	}
}

// loaded restores the exact bytes after reading the file.
func (g *Grant) loaded() error {
	if g.ExactBase64Text == nil {
		return nil
	}
	g.ExactBase64 = make([][]byte, len(g.ExactBase64Text))
	for i, t := range g.ExactBase64Text {
		if t == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(t)
		if err != nil || len(b) == 0 {
			return fmt.Errorf("grant %s: exact_base64[%d] is not base64", g.ID, i)
		}
		g.ExactBase64[i] = b
	}
	g.ExactBase64Text = nil
	exact, err := lossless.Strings(g.Exact, g.ExactBase64)
	if err != nil {
		return fmt.Errorf("grant %s: exact_base64: %v", g.ID, err)
	}
	g.Exact = exact
	return nil
}
