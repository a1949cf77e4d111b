package gates

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// ErrUnknownGate is returned (wrapped) by [Registry.Lookup] for a name that
// is not registered.
var ErrUnknownGate = errors.New("gates: unknown gate")

// Registry holds the gates a session exposes. It is safe for concurrent
// use, and it may change while sessions use it: a session that serves it
// adds and removes wrappers as gates come and go (see [Registry.Watch]).
type Registry struct {
	mu       sync.RWMutex
	gates    map[string]Gate
	watchers map[int]func([]Spec)
	nextW    int
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{gates: make(map[string]Gate)} }

// Register adds g. It fails when the name is empty, already taken, or not a
// name a shell would reach through PATH (see [mailbox.ValidateName]).
func (r *Registry) Register(g Gate) error {
	if g == nil {
		return errors.New("gates: register: nil gate")
	}
	name := g.Spec().Name
	if err := mailbox.ValidateName(name); err != nil {
		return fmt.Errorf("gates: register: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.gates[name]; ok {
		return fmt.Errorf("gates: register %q: a gate with this name is already registered", name)
	}
	r.gates[name] = g
	r.changedLocked()
	return nil
}

// Unregister removes the gate called name and closes it if it is a
// [Closer]. Calls already running finish; later calls get "unknown gate".
func (r *Registry) Unregister(name string) error {
	r.mu.Lock()
	g, ok := r.gates[name]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownGate, name)
	}
	delete(r.gates, name)
	r.changedLocked()
	r.mu.Unlock()
	if c, ok := g.(Closer); ok {
		return c.Close()
	}
	return nil
}

// Watch calls fn with the specs of every gate (sorted by name) after each
// Register and Unregister, until stop is called. fn runs synchronously, with
// the registry locked, so Register returns only once every watcher has seen
// the gate (a session has written its wrapper) and changes reach fn in
// order; fn must not call r.
func (r *Registry) Watch(fn func(specs []Spec)) (stop func()) {
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = map[int]func([]Spec){}
	}
	id := r.nextW
	r.nextW++
	r.watchers[id] = fn
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watchers, id)
		r.mu.Unlock()
	}
}

// changedLocked tells the watchers; r.mu must be held.
func (r *Registry) changedLocked() {
	if len(r.watchers) == 0 {
		return
	}
	specs := r.specsLocked()
	for _, fn := range r.watchers {
		fn(specs)
	}
}

// Close closes every gate that is a [Closer] and returns their errors.
func (r *Registry) Close() error {
	r.mu.RLock()
	var errs []error
	for name, g := range r.gates {
		if c, ok := g.(Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("gates: close %s: %w", name, err))
			}
		}
	}
	r.mu.RUnlock()
	return errors.Join(errs...)
}

// MustRegister is Register that panics on error, for static setups.
func (r *Registry) MustRegister(g Gate) {
	if err := r.Register(g); err != nil {
		panic(err)
	}
}

// Lookup returns the gate called name.
func (r *Registry) Lookup(name string) (Gate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.gates[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownGate, name)
	}
	return g, nil
}

// Specs returns the specs of all gates, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.specsLocked()
}

func (r *Registry) specsLocked() []Spec {
	out := make([]Spec, 0, len(r.gates))
	for _, g := range r.gates {
		out = append(out, g.Spec())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len returns the number of registered gates.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.gates)
}
