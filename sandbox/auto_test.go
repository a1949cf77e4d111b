package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/bwrap"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

type fakeBackend struct{ name string }

func (f *fakeBackend) Name() string { return f.name }
func (f *fakeBackend) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	return &sandbox.Result{}, nil
}

// With bwrap missing, auto over the local and bwrap backends fails
// closed, and falls back to local only when that is allowed.
func TestAutoRealBackends(t *testing.T) {
	reg := sandbox.NewRegistry()
	if err := local.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := bwrap.Register(reg); err != nil {
		t.Fatal(err)
	}
	s := sandbox.Settings{Extra: map[string]any{bwrap.Name: bwrap.Backend{Path: "/nonexistent/bwrap"}}}
	b, _, why, err := reg.Auto(context.Background(), s, false)
	if b != nil || !errors.Is(err, sandbox.ErrUnavailable) || !strings.HasPrefix(why, "bwrap: ") {
		t.Fatalf("Auto = %v, %q, %v", b, why, err)
	}
	var se *sandbox.Error
	if !errors.As(err, &se) || se.Backend != bwrap.Name || se.Help == "" {
		t.Errorf("bwrap's error (with its hint) is not wrapped: %v", err)
	}
	b, e, why, err := reg.Auto(context.Background(), s, true)
	if err != nil || b.Name() != local.Name || e.Strength != 0 || !strings.HasPrefix(why, "bwrap: ") || !strings.HasSuffix(why, "; local: usable") {
		t.Fatalf("Auto = %v, %q, %v", b, why, err)
	}
	if _, _, why, err := (&sandbox.Registry{}).Auto(context.Background(), s, true); !errors.Is(err, sandbox.ErrUnavailable) || why != "no candidates" {
		t.Errorf("empty registry: %q, %v", why, err)
	}
}
