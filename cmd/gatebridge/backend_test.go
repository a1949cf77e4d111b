package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/docker"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

func defaultConfig(t *testing.T, reg *sandbox.Registry) *Config {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEBRIDGE_CONFIG", "")
	cfg, _, err := loadConfig("", nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The program offers local, bwrap and docker, each registered by cmd
// (package sandbox registers none).
func TestBackendsOffered(t *testing.T) {
	if got := newBackends().Names(); !slices.Equal(got, []string{local.Name, bwrap.Name, docker.Name}) {
		t.Errorf("backends = %v", got)
	}
}

// sandbox.backend accepts exactly "auto" and the registered names: the CLI
// keeps no list of its own that could drift from the registry.
func TestBackendNamesFromRegistry(t *testing.T) {
	reg := newBackends()
	cfg := defaultConfig(t, reg)
	for _, name := range append(reg.Names(), autoBackend) {
		cfg.Sandbox.Backend = name
		if err := cfg.Validate(configBackends(reg)); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"podman", "", "Docker", "auto ", "local,bwrap"} {
		cfg.Sandbox.Backend = name
		err := cfg.Validate(configBackends(reg))
		ce, ok := err.(*configError)
		if !ok || ce.Key != "sandbox.backend" || ce.Help != "use auto, local, bwrap or docker" {
			t.Errorf("%q: %v (%+v)", name, err, ce)
		}
	}

	// Another registry, other names: without docker registered, docker
	// is unknown; a backend registered by the program is accepted and
	// listed in the hint.
	other := sandbox.NewRegistry()
	if err := errors.Join(local.Register(other), bwrap.Register(other)); err != nil {
		t.Fatal(err)
	}
	if err := other.Register(sandbox.BackendEntry{Name: "vm", Strength: 3,
		New: func(sandbox.Settings) (sandbox.Backend, error) { return local.New(), nil }}); err != nil {
		t.Fatal(err)
	}
	cfg.Sandbox.Backend = docker.Name
	if err := cfg.Validate(configBackends(other)); err == nil || !strings.Contains(err.(*configError).Help, "use auto, local, bwrap or vm") {
		t.Errorf("docker without docker registered: %v", err)
	}
	cfg.Sandbox.Backend = "vm"
	if err := cfg.Validate(configBackends(other)); err != nil {
		t.Errorf("vm refused: %v", err)
	}
}

// The flag help of run, doctor and bench names the registered backends.
func TestBackendFlagHelp(t *testing.T) {
	reg := newBackends()
	root := newRootCmd(nil, io.Discard, io.Discard)
	for _, path := range [][]string{{"run"}, {"doctor"}, {"bench"}} {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		usage := c.Flags().Lookup("sandbox").Usage
		for _, name := range reg.Names() {
			if !strings.Contains(usage, name) {
				t.Errorf("%s --sandbox help %q does not name %s", path[0], usage, name)
			}
		}
	}
}

// A configured backend is made through its entry; an unsandboxed one is
// marked so that run does not open the session to another uid.
func TestChooseBackendExplicit(t *testing.T) {
	reg := newBackends()
	cfg := defaultConfig(t, reg)
	cfg.Sandbox.Backend = local.Name
	chosen, err := chooseBackend(context.Background(), cfg, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer chosen.Close()
	if chosen.Backend.Name() != local.Name || chosen.Entry.Strength != 0 || chosen.Reason != "chosen with sandbox.backend=local" {
		t.Errorf("chosen = %+v", chosen)
	}
	if in := chosen.InsideWorkspace("/some/ws"); in != "/some/ws" {
		t.Errorf("local sees the workspace at %q", in)
	}
}
