package hint_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gatebridge/gatebridge/internal/hint"
)

type hinted struct {
	err  error
	help string
}

func (e *hinted) Error() string { return e.err.Error() }
func (e *hinted) Unwrap() error { return e.err }
func (e *hinted) Hint() string  { return e.help }

// bare carries a hint but wraps nothing.
type bare struct{ help string }

func (e bare) Error() string { return "bare" }
func (e bare) Hint() string  { return e.help }

var _ hint.Carrier = (*hinted)(nil)

func TestOf(t *testing.T) {
	base := errors.New("base")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"none", fmt.Errorf("wrapped: %w", base), ""},
		{"direct", &hinted{base, "fix it"}, "fix it"},
		{"value receiver", bare{"by value"}, "by value"},
		{"wrapped", fmt.Errorf("doing x: %w", &hinted{base, "fix it"}), "fix it"},
		{"outermost wins", &hinted{&hinted{base, "inner"}, "outer"}, "outer"},
		{"empty outer falls through", &hinted{fmt.Errorf("y: %w", &hinted{base, "inner"}), ""}, "inner"},
		{"joined, first with a hint", errors.Join(base, &hinted{base, ""}, bare{"second"}, bare{"third"}), "second"},
		{"joined, none", errors.Join(base, &hinted{base, ""}), ""},
		{"wrapped join", fmt.Errorf("z: %w", errors.Join(base, bare{"deep"})), "deep"},
	} {
		if got := hint.Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// With's error carries its hint and unwraps to the error; a type that
// embeds Hinted does too.
func TestWith(t *testing.T) {
	base := errors.New("boom")
	err := fmt.Errorf("run: %w", hint.With(base, "do this"))
	if hint.Of(err) != "do this" || !errors.Is(err, base) || err.Error() != "run: boom" {
		t.Errorf("With: %v, hint %q", err, hint.Of(err))
	}
	type own struct{ hint.Hinted }
	var e error = &own{hint.Hinted{base, "own"}}
	if hint.Of(e) != "own" || !errors.Is(e, base) {
		t.Errorf("embedded: %v, hint %q", e, hint.Of(e))
	}
}
