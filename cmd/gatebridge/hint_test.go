package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/internal/trust"
	"github.com/gatebridge/gatebridge/sandbox"
)

// printError prints the hint of every carrier (read through hint.Of),
// the outermost one when several are stacked, on its own line.
func TestPrintErrorHints(t *testing.T) {
	se := &sandbox.Error{Backend: "bwrap", Op: "start bwrap", Err: errors.New("no"), Help: "install bubblewrap"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("boom"), "gatebridge: boom\n"},
		{"withHint", withHint(errors.New("boom"), "do this"), "gatebridge: boom\ngatebridge: hint: do this\n"},
		{"usage", &usageError{withHint(errors.New("boom"), "see --help")}, "gatebridge: boom\ngatebridge: hint: see --help\n"},
		{"config", &configError{Key: "a.b", Msg: "bad", Help: "fix a.b"}, "gatebridge: config: a.b: bad\ngatebridge: hint: fix a.b\n"},
		{"sandbox", fmt.Errorf("run: %w", se), "gatebridge: run: bwrap: start bwrap: no\ngatebridge: hint: install bubblewrap\n"},
		{"outer hint wins", withHint(se, "better"), "gatebridge: bwrap: start bwrap: no\ngatebridge: hint: better\n"},
		{"empty outer", withHint(se, ""), "gatebridge: bwrap: start bwrap: no\ngatebridge: hint: install bubblewrap\n"},
		{"secret file", fmt.Errorf("serve: --token-file: %w", &trust.FileError{Msg: "t is a link", Help: "give the file"}),
			"gatebridge: serve: --token-file: t is a link\ngatebridge: hint: give the file\n"},
		{"rpc", &rpc.Error{Code: 1, Message: "refused", Data: map[string]any{"hint": "ask"}}, "gatebridge: refused\ngatebridge: hint: ask\n"},
	} {
		var buf bytes.Buffer
		printError(&buf, tc.err)
		if buf.String() != tc.want {
			t.Errorf("%s: printed %q, want %q", tc.name, buf.String(), tc.want)
		}
	}
}

// TestErrorKindImages: run --json tells a refused image, a failed pull
// and a missing image apart (a failed pull also wraps ErrUnavailable).
func TestErrorKindImages(t *testing.T) {
	se := func(errs ...error) error {
		return &sandbox.Error{Backend: "docker", Op: "x", Err: fmt.Errorf("%w", errors.Join(errs...))}
	}
	for want, err := range map[string]error{
		"image_refused":       se(sandbox.ErrImageRefused),
		"image_pull":          se(sandbox.ErrUnavailable, sandbox.ErrImagePull),
		"image_missing":       se(sandbox.ErrUnavailable, sandbox.ErrImageMissing),
		"sandbox_unavailable": se(sandbox.ErrUnavailable),
	} {
		if got := errorKind(err); got != want {
			t.Errorf("%v: kind %s, want %s", err, got, want)
		}
	}
}
