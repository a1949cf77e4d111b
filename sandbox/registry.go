package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// Doctor statuses of a [Finding].
const (
	StatusOK      = "ok"
	StatusWarn    = "warn"    // works, with a caveat
	StatusProblem = "problem" // does not work here
)

// Finding is one line of `gatebridge doctor`.
type Finding struct {
	Check  string `json:"check"`
	Status string `json:"status"` // StatusOK, StatusWarn or StatusProblem
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

// Settings are the user's configuration as the backends' constructors
// read it. Each backend takes its own from Extra, by backend name, in a
// type its entry documents (docker: docker.Config; bwrap: a bwrap.Backend
// holding Path and ReadOnly); a missing value means that backend's
// defaults.
type Settings struct {
	Limits Limits // what isolating backends enforce (Spec.Limits too)
	// Image, when set, is the image to run, over the backend's own
	// configuration; only a backend whose entry has Images takes one.
	Image string
	// Runtime, when set, is the OCI runtime to run the sandbox with
	// (runsc, runc, …), over the backend's own configuration; only a
	// backend whose entry has Runtimes takes one.
	Runtime string
	Extra   map[string]any
}

// BackendEntry describes one kind of backend: how to make it, how to tell
// whether it can run here, and what `gatebridge doctor` says about it.
type BackendEntry struct {
	Name      string
	Summary   string   // one line, for help texts
	Isolates  string   // what the sandbox keeps from the host, for doctor
	Platforms []string // GOOS values it runs on; nil means every one
	// Images is set when the backend runs images and New honours
	// [Settings].Image (docker).
	Images bool
	// Runtimes is set when the backend runs its sandboxes with an OCI
	// runtime and New honours [Settings].Runtime (docker).
	Runtimes bool
	// Strength orders `--sandbox auto`: it tries stronger isolation first
	// (same strength: registry order). 0 isolates nothing: auto uses such
	// a backend only when unsandboxed runs are allowed, and last.
	Strength int
	// New makes the backend from s. It must not run anything.
	New func(s Settings) (Backend, error)
	// Available reports, without side effects, whether b (made by New)
	// can run a command here now: nil, or an error whose [*Error] Hint
	// says how to fix it. nil means always.
	Available func(ctx context.Context, b Backend) error
	// Openable, when set, replaces Available where the backend is chosen
	// by name rather than by auto ([BackendEntry.Usable]): it may accept
	// what Prepare fixes (docker: an image that is not present, which
	// Prepare pulls). auto ([Registry.Auto]) keeps to Available, so
	// whether it picks a backend does not depend on, say, a registry.
	Openable func(ctx context.Context, b Backend) error
	// Prepare readies b once it has been chosen to run commands (docker:
	// pull a missing image, remove containers of dead gatebridges). nil
	// means nothing to do.
	Prepare func(ctx context.Context, b Backend) error
	// Doctor says what `gatebridge doctor` reports about b; a
	// StatusProblem finding means b cannot run here. nil means one line
	// from Available.
	Doctor func(ctx context.Context, b Backend, s Settings) []Finding
}

// Registry holds the backends a program offers, in the order it
// registered them (ties in [Registry.Auto] go to the first). It is safe
// for concurrent use.
type Registry struct {
	mu      sync.Mutex
	entries []BackendEntry
}

// NewRegistry returns an empty registry. Package sandbox defines no
// backend: a program registers those it offers, each from its own
// package (local.Register, bwrap.Register, docker.Register), in the
// order ties should go.
func NewRegistry() *Registry { return &Registry{} }

// Register adds e. An empty name, a name already registered, the reserved
// name "auto" or a missing New is an error.
func (r *Registry) Register(e BackendEntry) error {
	switch {
	case e.Name == "":
		return errors.New("sandbox: register backend: empty name")
	case e.Name == "auto":
		return errors.New(`sandbox: register backend: "auto" is reserved`)
	case e.New == nil:
		return fmt.Errorf("sandbox: register backend %s: no New", e.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.entries {
		if have.Name == e.Name {
			return fmt.Errorf("sandbox: register backend %s: already registered", e.Name)
		}
	}
	r.entries = append(r.entries, e)
	return nil
}

// Entries returns the registered entries in registry order.
func (r *Registry) Entries() []BackendEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries)
}

// Names returns the registered names in registry order.
func (r *Registry) Names() []string {
	var out []string
	for _, e := range r.Entries() {
		out = append(out, e.Name)
	}
	return out
}

// Lookup returns the entry called name; the error lists the registered
// names.
func (r *Registry) Lookup(name string) (BackendEntry, error) {
	for _, e := range r.Entries() {
		if e.Name == name {
			return e, nil
		}
	}
	return BackendEntry{}, fmt.Errorf("sandbox: unknown backend %q (registered: %s)", name, strings.Join(r.Names(), ", "))
}

// Supported reports whether e runs on this GOOS.
func (e BackendEntry) Supported() bool {
	return e.Platforms == nil || slices.Contains(e.Platforms, runtime.GOOS)
}

// Usable reports whether b (made by e.New), chosen by name, can run here
// once Prepare ran: e.Openable (else e.Available), after the platform
// check.
func (e BackendEntry) Usable(ctx context.Context, b Backend) error {
	if e.Openable != nil && e.Supported() {
		return e.Openable(ctx, b)
	}
	return e.availableNow(ctx, b)
}

// availableNow is what auto requires: e.Available, after the platform
// check.
func (e BackendEntry) availableNow(ctx context.Context, b Backend) error {
	if !e.Supported() {
		return &Error{Backend: e.Name, Op: "check", Err: fmt.Errorf("%w: runs on %s, not %s", ErrUnavailable, strings.Join(e.Platforms, ", "), runtime.GOOS)}
	}
	if e.Available == nil {
		return nil
	}
	return e.Available(ctx, b)
}

// Findings is what doctor reports about e: its own Doctor lines, or one
// line from Check. b is nil when New failed with newErr.
func (e BackendEntry) Findings(ctx context.Context, b Backend, newErr error, s Settings) []Finding {
	check := "backend " + e.Name
	if newErr == nil && e.Supported() && e.Doctor != nil {
		return e.Doctor(ctx, b, s)
	}
	err := newErr
	if err == nil {
		err = e.Usable(ctx, b)
	}
	if err != nil {
		return []Finding{ProblemFinding(check, err)}
	}
	return []Finding{{Check: check, Status: StatusOK, Detail: "usable (" + e.Isolates + ")"}}
}

// ProblemFinding turns err into a problem line with its [*Error] hint.
func ProblemFinding(check string, err error) Finding {
	f := Finding{Check: check, Status: StatusProblem, Detail: err.Error()}
	f.Hint = hint.Of(err)
	return f
}

// Close releases b when it holds resources (an [io.Closer]).
func Close(b Backend) {
	if c, ok := b.(io.Closer); ok {
		_ = c.Close()
	}
}

// Auto makes and checks the registered backends, strongest isolation
// first (see [BackendEntry.Strength]), and returns the first that can run
// here, with its entry; those that cannot are closed. Unsandboxed
// backends are tried only when allowUnsandboxed is set. why tells what
// was tried, for a log line or `gatebridge doctor`, e.g.
//
//	docker: engine unreachable at unix:///var/run/docker.sock; bwrap: usable
//
// When none can run, err wraps [ErrUnavailable] and every candidate's
// error.
func (r *Registry) Auto(ctx context.Context, s Settings, allowUnsandboxed bool) (Backend, BackendEntry, string, error) {
	var cands []BackendEntry
	for _, e := range r.Entries() {
		if e.Strength > 0 || allowUnsandboxed {
			cands = append(cands, e)
		}
	}
	slices.SortStableFunc(cands, func(a, b BackendEntry) int { return b.Strength - a.Strength })
	b, i, why, err := pick(ctx, s, cands)
	if err != nil {
		return nil, BackendEntry{}, why, err
	}
	return b, cands[i], why, nil
}

// pick makes each candidate in turn and returns the first that can run
// here, closing the others it made.
func pick(ctx context.Context, s Settings, cands []BackendEntry) (Backend, int, string, error) {
	var notes []string
	var errs []error
	for i, e := range cands {
		b, err := e.New(s)
		if err != nil {
			// It could not even be set up: say what failed (the op too).
			notes = append(notes, e.Name+": "+strings.TrimPrefix(err.Error(), e.Name+": "))
			errs = append(errs, err)
			continue
		}
		if err = e.availableNow(ctx, b); err != nil {
			Close(b)
			if ctx.Err() != nil {
				return nil, 0, strings.Join(notes, "; "), fmt.Errorf("sandbox: choose backend: %w", ctx.Err())
			}
			notes = append(notes, e.Name+": "+reason(e.Name, err))
			errs = append(errs, err)
			continue
		}
		notes = append(notes, e.Name+": usable")
		return b, i, strings.Join(notes, "; "), nil
	}
	why := strings.Join(notes, "; ")
	if len(cands) == 0 {
		why = "no candidates"
	}
	return nil, 0, why, fmt.Errorf("sandbox: no usable backend (%s): %w", why, errors.Join(append([]error{ErrUnavailable}, errs...)...))
}

// reason is err without the "name: " prefix an [*Error] carries.
func reason(name string, err error) string {
	var e *Error
	if errors.As(err, &e) && e.Err != nil {
		return strings.TrimPrefix(e.Err.Error(), ErrUnavailable.Error()+": ")
	}
	return strings.TrimPrefix(err.Error(), name+": ")
}

// Isolating is r without its backends that isolate nothing
// (Strength 0: local).
func (r *Registry) Isolating() *Registry {
	out := &Registry{}
	for _, e := range r.Entries() {
		if e.Strength > 0 {
			_ = out.Register(e)
		}
	}
	return out
}
