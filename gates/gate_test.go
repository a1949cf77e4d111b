package gates

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestExitCodeOf(t *testing.T) {
	denied := Deniedf("read_file: %q is outside the workspace", "../x")
	usage := Usagef("search: bad pattern: %w", fs.ErrInvalid)
	for _, tc := range []struct {
		name string
		code int
		err  error
		want int
	}{
		{"ok", 0, nil, 0},
		{"own code", 42, nil, 42},
		{"denied", 0, denied, ExitDenied},
		{"denied wrapped", 0, fmt.Errorf("ctx: %w", denied), ExitDenied},
		{"legacy denied", 0, fmt.Errorf("%w: x", ErrDenied), ExitDenied},
		{"usage", 0, usage, ExitUsage},
		{"exit error", 0, &ExitError{Code: 7, Err: errors.New("x")}, 7},
		{"deadline", 0, fmt.Errorf("x: %w", context.DeadlineExceeded), ExitTimeout},
		{"other", 3, errors.New("boom"), ExitFailure},
	} {
		if got := ExitCodeOf(tc.code, tc.err); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if !errors.Is(denied, ErrDenied) || errors.Is(denied, ErrUsage) {
		t.Error("Deniedf does not match ErrDenied alone")
	}
	if !errors.Is(usage, ErrUsage) || !errors.Is(usage, fs.ErrInvalid) {
		t.Error("Usagef does not match ErrUsage and its wrapped error")
	}
	if got := denied.Error(); got != `read_file: "../x" is outside the workspace` {
		t.Errorf("message %q", got)
	}
	if strings.HasPrefix(usage.Error(), "usage") {
		t.Errorf("message %q", usage.Error())
	}
}

func TestStdinModeText(t *testing.T) {
	for m, want := range map[StdinMode]string{StdinNone: "none", StdinIfNoArgs: "if-no-args", StdinAlways: "always", StdinIfAtDash: "if-at-dash"} {
		if b, _ := m.MarshalText(); string(b) != want {
			t.Errorf("%d: %q", m, b)
		}
	}
}
