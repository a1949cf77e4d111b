package gates

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func nopGate(name string) Gate {
	return Func(Spec{Name: name, Summary: "nop", Usage: name}, func(context.Context, *Call) (int, error) { return 0, nil })
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"zeta", "alpha", "my-tool.v2"} {
		if err := r.Register(nopGate(n)); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	for _, tc := range []struct {
		name string
		g    Gate
		err  string
	}{
		{"duplicate", nopGate("alpha"), `gates: register "alpha": a gate with this name is already registered`},
		{"empty", nopGate(""), "empty"},
		{"slash", nopGate("a/b"), "invalid gate name"},
		{"dot dot", nopGate(".."), "invalid gate name"},
		{"leading dash", nopGate("-x"), "invalid gate name"},
		{"space", nopGate("a b"), "invalid gate name"},
		{"builtin", nopGate("echo"), "shell builtin"},
		{"nil", nil, "nil gate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Register(tc.g)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
	if r.Len() != 3 {
		t.Errorf("len %d", r.Len())
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "alpha,my-tool.v2,zeta" {
		t.Errorf("specs %v", names)
	}
	if _, err := r.Lookup("alpha"); err != nil {
		t.Error(err)
	}
	_, err := r.Lookup("nope")
	if !errors.Is(err, ErrUnknownGate) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("lookup error %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustRegister of a duplicate did not panic")
			}
		}()
		r.MustRegister(nopGate("zeta"))
	}()
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 20 {
		wg.Go(func() {
			if r.Register(nopGate("same")) == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
			r.Lookup("same")
			r.Specs()
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d registrations of one name succeeded", wins)
	}
}
