package gates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/hint"
)

// Names of the kinds of gates this package registers.
const (
	KindBuiltin = "builtin"
	KindCommand = "command"
)

// A Kind is one kind of gate a configuration can declare: the built-in
// gates, a host command behind an argument policy, the tools of an MCP
// server (gates/mcptools), … A program registers the kinds it offers in a
// [KindRegistry], as it registers sandbox backends, and builds each
// configured source of gates with [Kind.Add].
type Kind struct {
	// Name is how configurations and listings name the kind ("command").
	Name string
	// Summary is one line about the kind, for listings.
	Summary string
	// Settings names the type New takes, for error messages
	// ("gates.CommandSpec").
	Settings string
	// New validates settings, which must be of the kind's type (see
	// Settings), and makes the gates they declare for env. It returns an
	// error naming the setting at fault, as a [*SettingError] when it can
	// tell which one. ctx bounds New's own work (starting or connecting to
	// an MCP server), not the gates' lives. On error it leaves nothing
	// open. The gates of one New may share what they hold (one MCP
	// server's connection): closing any of them may close it for all, so
	// Close must be safe to call on each.
	New func(ctx context.Context, settings any, env Env) ([]Gate, error)
	// Clash says what happens to a gate whose name is taken.
	Clash ClashPolicy
}

// ClashPolicy says what [Kind.Add] does with a gate whose name another
// gate already has (or that the registry refuses).
type ClashPolicy int

const (
	// FailOnClash makes it an error: a [*SettingError] for the setting
	// "name". For kinds whose gates the operator names (builtin,
	// command).
	FailOnClash ClashPolicy = iota
	// SkipOnClash leaves the gate out and warns ([Env.Warn]): "tool NAME
	// is not a gate: WHY". For kinds whose gate names come from elsewhere
	// (an MCP server's tool list), which the operator cannot rename one
	// by one.
	SkipOnClash
)

// Env is what a kind's gates need from the host: the same for every
// source of gates in one registry (one workspace, one sandbox).
type Env struct {
	// Workspace is the workspace as the host sees it; Inside is where
	// the sandbox sees it (equal when it sees host paths), so that gates
	// accept absolute paths as the sandbox writes them.
	Workspace, Inside string
	// Untrusted are the directories the sandbox can write (the
	// workspace, the writable root, the session directories): no program
	// a gate runs, and nothing a gate trusts, may come from there.
	Untrusted []string
	// Isolator runs a gate's program in a sandbox of its own. Kinds get
	// it through [Env.Isolation]: with none (nil), a gate that runs a
	// program is refused unless its settings say to run it on the host
	// ([IsolateSpec].Host).
	Isolator Isolator
	// Secrets expands ${secret:NAME} in the values that take a reference
	// (a command gate's env, an MCP server's env and headers, an http
	// rule's headers); a kind reads each secret it references when it
	// makes its gates, so that one that cannot be read is a config error.
	// nil: no secrets are configured, and a reference is an error.
	Secrets *secrets.Store
	// Protected are the workspace's protected paths, relative to it
	// (sandbox.protected_paths): no isolated gate may write one.
	Protected []string
	// Sessions are the directories that hold session directories: no
	// isolated gate is given one.
	Sessions []string
	// Warn hears what a kind left out, and why (a refused MCP tool); nil
	// drops it. A program prefixes the source's config key.
	Warn func(string)
}

// warn calls Warn if it is set.
func (e Env) warn(s string) {
	if e.Warn != nil {
		e.Warn(s)
	}
}

// SettingError is an error in a kind's settings that names the setting at
// fault, so that a program can name its own key for it: Field "max_tools"
// of the source mcp.servers.x is the key mcp.servers.x.max_tools.
type SettingError struct {
	// Field is the setting, under the source's key; "" is the source as a
	// whole.
	Field string
	Err   error
	// Help, when set, says how to fix it; key is the source's key (for a
	// hint that names another of its settings).
	Help func(key string) string
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// Add makes the gates settings declare (k.New) and registers them in reg,
// under k.Clash, and returns the names it registered. Gates it does not
// register are closed when none of them was registered (they may share
// what they hold with the registered ones, which reg closes). On error the
// gates registered before it stay in reg: the caller closes reg.
func (k Kind) Add(ctx context.Context, reg *Registry, settings any, env Env) ([]string, error) {
	gs, err := k.New(ctx, settings, env)
	if err != nil {
		return nil, err
	}
	var names []string
	for i, g := range gs {
		err := reg.Register(g)
		if err == nil {
			names = append(names, g.Spec().Name)
			continue
		}
		if k.Clash != SkipOnClash {
			closeGates(gs[i:])
			return names, &SettingError{Field: "name", Err: err, Help: func(string) string { return "pick another name" }}
		}
		env.warn(fmt.Sprintf("tool %s is not a gate: %v", strconv.QuoteToASCII(g.Spec().Name), err))
	}
	if len(names) == 0 {
		closeGates(gs)
	}
	return names, nil
}

// closeGates closes each gate that is a [Closer].
func closeGates(gs []Gate) {
	for _, g := range gs {
		if c, ok := g.(Closer); ok {
			c.Close()
		}
	}
}

// ErrUnknownKind is returned (wrapped) by [KindRegistry.Lookup] for a
// name that is not registered.
var ErrUnknownKind = errors.New("gates: unknown kind")

// KindRegistry holds the kinds of gates a program offers, in the order
// they were registered. It is safe for concurrent use.
type KindRegistry struct {
	mu    sync.Mutex
	kinds map[string]Kind
	order []string
}

// NewKindRegistry returns a registry holding this package's kinds:
// builtin, then command. Other packages add theirs with a Register
// function of their own (mcptools.Register).
func NewKindRegistry() *KindRegistry {
	r := &KindRegistry{kinds: map[string]Kind{}}
	for _, k := range []Kind{builtinKind, commandKind} {
		if err := r.Register(k); err != nil {
			panic(err) // a fresh registry holds neither
		}
	}
	return r
}

// Register adds k. It fails when k has no name, a name that is not a
// lower-case word (letters, digits, _ and -), a name already registered,
// or no New.
func (r *KindRegistry) Register(k Kind) error {
	if k.Name == "" {
		return errors.New("gates: register kind: empty name")
	}
	if strings.Trim(k.Name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("gates: register kind %q: not a lower-case word", k.Name)
	}
	if k.New == nil {
		return fmt.Errorf("gates: register kind %q: no New", k.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[k.Name]; dup {
		return fmt.Errorf("gates: register kind %q: a kind with this name is already registered", k.Name)
	}
	r.kinds[k.Name] = k
	r.order = append(r.order, k.Name)
	return nil
}

// Lookup returns the kind called name; the error names it and lists the
// kinds there are.
func (r *KindRegistry) Lookup(name string) (Kind, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.kinds[name]; ok {
		return k, nil
	}
	return Kind{}, fmt.Errorf("%w %q (kinds: %s)", ErrUnknownKind, name, strings.Join(r.order, ", "))
}

// Kinds returns every kind, in the order they were registered.
func (r *KindRegistry) Kinds() []Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Kind, len(r.order))
	for i, n := range r.order {
		out[i] = r.kinds[n]
	}
	return out
}

var builtinKind = KindOf(KindBuiltin, "read_file, list_dir, search, write_file (with a writable root), submit, gb_echo", FailOnClash,
	func(_ context.Context, o Options, env Env) ([]Gate, error) { return Builtins(o.inEnv(env)) })

// inEnv fills what o leaves to the environment: with no Root, the
// workspace (seen by the sandbox at env.Inside), and where the sandbox sees
// a writable root that is that root.
func (o Options) inEnv(env Env) Options {
	if o.Root == "" {
		o.Root, o.SandboxRoot = env.Workspace, env.Inside
	}
	if o.WritableRoot != "" && o.WritableRoot == o.Root && o.SandboxWritableRoot == "" {
		o.SandboxWritableRoot = o.SandboxRoot
	}
	return o
}

// The command kind runs each gate's program in a sandbox of its own
// ([Env.Isolation]) unless its Isolate says Host; a Dir or Home it binds
// is checked as an isolate path is.
var commandKind = KindOf(KindCommand, "a host program with a fixed argv prefix; arguments checked against its policy", FailOnClash,
	func(ctx context.Context, c CommandSpec, env Env) ([]Gate, error) {
		c.Untrusted = append(slices.Clip(c.Untrusted), env.Untrusted...)
		if c.Workspace == "" {
			c.Workspace, c.Protected = env.Workspace, env.Protected
		}
		if c.Secrets == nil {
			c.Secrets = env.Secrets
		}
		iso, isoSpec := c.Isolator, c.Isolate
		c.Isolator = nil
		g, err := NewCommand(c)
		if err != nil {
			return nil, err
		}
		if err := c.Secrets.Resolve(ctx, c.Env, c.Untrusted); err != nil {
			return nil, &SettingError{Field: "env", Err: err, Help: secretHelp(err)}
		}
		cg := g.(*commandGate)
		if iso == nil {
			var ex []string
			if iso, isoSpec, ex, err = env.IsolationResolved(ctx, isoSpec, ExtraPath{"dir", cg.dir}, ExtraPath{"home", cg.home}); err != nil {
				return nil, err
			}
			if iso != nil {
				// Resolved now, as checked: a link that appears later on
				// the way is refused by the isolator, not followed.
				cg.dir, cg.home = ex[0], ex[1]
			}
		}
		cg.isolate(iso, isoSpec)
		return []Gate{g}, nil
	})

// secretHelp is the hint of a secret's error, for a [SettingError].
func secretHelp(err error) func(string) string {
	h := hint.Of(err)
	return func(string) string { return h }
}

// KindOf makes the kind called name whose settings are of type T: its
// Settings names T, and its New passes them to f, or fails on settings of
// another type naming both types.
func KindOf[T any](name, summary string, clash ClashPolicy, f func(ctx context.Context, settings T, env Env) ([]Gate, error)) Kind {
	var zero T
	return Kind{Name: name, Summary: summary, Settings: fmt.Sprintf("%T", zero), Clash: clash,
		New: func(ctx context.Context, s any, env Env) ([]Gate, error) {
			v, ok := s.(T)
			if !ok {
				return nil, fmt.Errorf("gates: kind %s: settings are %T, want %T", name, s, zero)
			}
			return f(ctx, v, env)
		}}
}
