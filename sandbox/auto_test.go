package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

type fakeBackend struct {
	name string
	err  error
}

func (f *fakeBackend) Name() string { return f.name }
func (f *fakeBackend) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	return &sandbox.Result{}, nil
}

type fakeChecker struct{ fakeBackend }

func (f *fakeChecker) Check(context.Context) error { return f.err }

func TestAuto(t *testing.T) {
	ctx := context.Background()
	docker := &fakeChecker{fakeBackend{name: "docker", err: &sandbox.Error{Backend: "docker", Op: "ping",
		Err: errors.New("engine unreachable at unix:///var/run/docker.sock")}}}
	bwrapOK := &fakeChecker{fakeBackend{name: "bwrap"}}
	bwrapBad := &fakeChecker{fakeBackend{name: "bwrap", err: errors.New("bwrap: no userns")}}
	local := &fakeBackend{name: "local"}

	b, why, err := sandbox.Auto(ctx, []sandbox.Backend{docker, bwrapOK, local})
	if err != nil || b != bwrapOK {
		t.Fatalf("Auto = %v, %q, %v", b, why, err)
	}
	if want := "docker: engine unreachable at unix:///var/run/docker.sock; bwrap: usable"; why != want {
		t.Errorf("why = %q, want %q", why, want)
	}

	// A backend without Check counts as usable.
	b, why, err = sandbox.Auto(ctx, []sandbox.Backend{docker, bwrapBad, local})
	if err != nil || b != local || why != "docker: engine unreachable at unix:///var/run/docker.sock; bwrap: no userns; local: usable" {
		t.Fatalf("Auto = %v, %q, %v", b, why, err)
	}

	b, why, err = sandbox.Auto(ctx, []sandbox.Backend{docker, bwrapBad})
	if b != nil || !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "no userns") {
		t.Fatalf("Auto = %v, %q, %v", b, why, err)
	}
	var se *sandbox.Error
	if !errors.As(err, &se) || se.Backend != "docker" {
		t.Errorf("the candidates' errors are not wrapped: %v", err)
	}

	if _, _, err := sandbox.Auto(ctx, nil); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Auto(nil) = %v", err)
	}
}

func TestAutoRealBackends(t *testing.T) {
	b, why, err := sandbox.Auto(context.Background(), []sandbox.Backend{&sandbox.Bwrap{Path: "/nonexistent/bwrap"}, sandbox.NewLocal()})
	if err != nil || b.Name() != "local" || !strings.HasPrefix(why, "bwrap: ") || !strings.HasSuffix(why, "; local: usable") {
		t.Fatalf("Auto = %v, %q, %v", b, why, err)
	}
}
