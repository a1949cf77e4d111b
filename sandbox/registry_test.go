package sandbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

// fakeEntry is a backend entry whose availability is err; made counts
// the backends New made and closed those closed.
func fakeEntry(name string, strength int, err error, made, closed *[]string) sandbox.BackendEntry {
	return sandbox.BackendEntry{
		Name: name, Strength: strength,
		New: func(sandbox.Settings) (sandbox.Backend, error) {
			*made = append(*made, name)
			return &closingBackend{fakeBackend{name: name}, closed}, nil
		},
		Available: func(context.Context, sandbox.Backend) error { return err },
	}
}

type closingBackend struct {
	fakeBackend
	closed *[]string
}

func (c *closingBackend) Close() error { *c.closed = append(*c.closed, c.name); return nil }

// NewRegistry is empty: package sandbox defines no backend, and a
// program offers only what it registers.
func TestRegistryEmpty(t *testing.T) {
	if got := sandbox.NewRegistry().Names(); len(got) != 0 {
		t.Errorf("NewRegistry names = %v, want none", got)
	}
}

func TestRegistryLookupUnknown(t *testing.T) {
	reg := sandbox.NewRegistry()
	var made, closed []string
	for _, n := range []string{"local", "bwrap"} {
		if err := reg.Register(fakeEntry(n, 0, nil, &made, &closed)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := reg.Lookup("dokcer")
	if err == nil || !strings.Contains(err.Error(), `"dokcer"`) || !strings.Contains(err.Error(), "local, bwrap") {
		t.Errorf("Lookup(dokcer) = %v, want the name asked for and the registered ones", err)
	}
}

func TestRegistryRegisterRefuses(t *testing.T) {
	reg := sandbox.NewRegistry()
	var made, closed []string
	if err := reg.Register(fakeEntry("bwrap", 1, nil, &made, &closed)); err != nil {
		t.Fatal(err)
	}
	okNew := func(sandbox.Settings) (sandbox.Backend, error) { return &fakeBackend{name: "x"}, nil }
	for _, e := range []sandbox.BackendEntry{
		{Name: "", New: okNew},
		{Name: "auto", New: okNew},
		{Name: "bwrap", New: okNew},
		{Name: "nonew"},
	} {
		if err := reg.Register(e); err == nil {
			t.Errorf("Register(%q) succeeded", e.Name)
		}
	}
	if got := reg.Names(); len(got) != 1 {
		t.Errorf("names after refused registrations = %v", got)
	}
}

// auto tries stronger isolation first, the registry order among equals,
// closes what it made and could not use, and takes an unsandboxed
// backend only when allowed.
func TestRegistryAuto(t *testing.T) {
	ctx := context.Background()
	var made, closed []string
	down := &sandbox.Error{Backend: "strong", Op: "ping", Err: errors.New("engine unreachable")}
	reg := &sandbox.Registry{}
	for _, e := range []sandbox.BackendEntry{
		fakeEntry("none", 0, nil, &made, &closed),
		fakeEntry("weak1", 1, errors.New("weak1: no userns"), &made, &closed),
		fakeEntry("weak2", 1, nil, &made, &closed),
		fakeEntry("strong", 2, down, &made, &closed),
	} {
		if err := reg.Register(e); err != nil {
			t.Fatal(err)
		}
	}
	b, e, why, err := reg.Auto(ctx, sandbox.Settings{}, false)
	if err != nil || b.Name() != "weak2" || e.Name != "weak2" {
		t.Fatalf("Auto = %v, %v, %q, %v", b, e.Name, why, err)
	}
	if want := "strong: engine unreachable; weak1: no userns; weak2: usable"; why != want {
		t.Errorf("why = %q, want %q", why, want)
	}
	if !slices.Equal(made, []string{"strong", "weak1", "weak2"}) || !slices.Equal(closed, []string{"strong", "weak1"}) {
		t.Errorf("made %v, closed %v", made, closed)
	}

	reg2 := &sandbox.Registry{}
	reg2.Register(fakeEntry("none", 0, nil, &made, &closed))
	reg2.Register(fakeEntry("weak", 1, errors.New("weak: broken"), &made, &closed))
	if b, _, why, err := reg2.Auto(ctx, sandbox.Settings{}, false); b != nil || !errors.Is(err, sandbox.ErrUnavailable) || strings.Contains(why, "none") {
		t.Errorf("unsandboxed not allowed: Auto = %v, %q, %v", b, why, err)
	}
	if b, _, why, err := reg2.Auto(ctx, sandbox.Settings{}, true); err != nil || b.Name() != "none" || why != "weak: broken; none: usable" {
		t.Errorf("unsandboxed allowed: Auto = %v, %q, %v", b, why, err)
	}
}

// An entry for another platform is never usable, whatever Available says.
func TestRegistryPlatforms(t *testing.T) {
	e := sandbox.BackendEntry{Name: "elsewhere", Platforms: []string{"plan9"},
		New: func(sandbox.Settings) (sandbox.Backend, error) { return &fakeBackend{name: "elsewhere"}, nil }}
	if e.Supported() {
		t.Fatal("plan9 entry supported here")
	}
	err := e.Usable(context.Background(), &fakeBackend{name: "elsewhere"})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "plan9") {
		t.Errorf("Usable = %v", err)
	}
	f := e.Findings(context.Background(), nil, nil, sandbox.Settings{})
	if len(f) != 1 || f[0].Status != sandbox.StatusProblem {
		t.Errorf("Findings = %+v", f)
	}
}
