package gates

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/gatebridge/gatebridge/wrappers"
)

// ErrUnknownGate is returned (wrapped) by [Registry.Lookup] for a name that
// is not registered.
var ErrUnknownGate = errors.New("gates: unknown gate")

// Registry holds the gates a session exposes. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	gates map[string]Gate
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{gates: make(map[string]Gate)} }

// Register adds g. It fails when the name is empty, already taken, or not a
// name a shell would reach through PATH (see [wrappers.ValidateName]).
func (r *Registry) Register(g Gate) error {
	if g == nil {
		return errors.New("gates: register: nil gate")
	}
	name := g.Spec().Name
	if err := wrappers.ValidateName(name); err != nil {
		return fmt.Errorf("gates: register: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.gates[name]; ok {
		return fmt.Errorf("gates: register %q: a gate with this name is already registered", name)
	}
	r.gates[name] = g
	return nil
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
