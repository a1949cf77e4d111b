package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

// toError gives a backend's failure its backend and hint in data, found
// through whatever wraps it, and passes an *Error on as it is; an
// *Error's hint, sent or decoded, is read back through hint.Of.
func TestToErrorHints(t *testing.T) {
	refused := &sandbox.Error{Backend: "docker", Op: "check image evil",
		Err: fmt.Errorf("%w: image evil is not in sandbox.docker.images", sandbox.ErrImageRefused), Help: "add it to sandbox.docker.images"}
	pull := &sandbox.Error{Backend: "docker", Op: "pull",
		Err: fmt.Errorf("%w: %w: image x is not present and pulling it failed", sandbox.ErrUnavailable, sandbox.ErrImagePull), Help: "check the registry"}
	missing := &sandbox.Error{Backend: "docker", Op: "image",
		Err: fmt.Errorf("%w: %w: image x not present", sandbox.ErrUnavailable, sandbox.ErrImageMissing), Help: "make test-image"}
	se := &sandbox.Error{Backend: "bwrap", Op: "start bwrap", Err: sandbox.ErrUnavailable, Help: "install bubblewrap"}
	for _, tc := range []struct {
		name string
		err  error
		want *Error
	}{
		{"backend", se, &Error{Code: CodeUnavailable, Message: se.Error(),
			Data: map[string]string{"backend": "bwrap", "hint": "install bubblewrap"}}},
		{"wrapped backend", fmt.Errorf("open: %w", se), &Error{Code: CodeUnavailable, Message: "open: " + se.Error(),
			Data: map[string]string{"backend": "bwrap", "hint": "install bubblewrap"}}},
		{"backend, no hint", &sandbox.Error{Backend: "docker", Op: "run", Err: errors.New("boom")},
			&Error{Code: CodeInternalError, Message: "docker: run: boom", Data: map[string]string{"backend": "docker"}}},
		{"plain", errors.New("boom"), &Error{Code: CodeInternalError, Message: "boom"}},
		// The caller chose the image: invalid params, with the hint.
		{"image refused", refused, &Error{Code: CodeInvalidParams, Message: "invalid params: " + refused.Error(),
			Data: map[string]string{"backend": "docker", "hint": "add it to sandbox.docker.images", "kind": "image_refused"}}},
		{"image pull", pull, &Error{Code: CodeUnavailable, Message: pull.Error(),
			Data: map[string]string{"backend": "docker", "hint": "check the registry", "kind": "image_pull"}}},
		{"image missing, auto", &control.Error{Kind: control.KindUnavailable, Msg: "no sandbox is usable", Err: missing},
			&Error{Code: CodeUnavailable, Message: "no sandbox is usable", Data: map[string]string{"hint": "make test-image", "kind": "image_missing"}}},
	} {
		got := toError(tc.err)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: toError = %#v, want %#v", tc.name, got, tc.want)
		}
		if h, want := hint.Of(got), tc.want.Hint(); h != want {
			t.Errorf("%s: hint.Of = %q, want %q", tc.name, h, want)
		}
	}
	own := &Error{Code: CodeInvalidParams, Message: "refusing", Data: map[string]string{"hint": "keep it out"}}
	if got := toError(fmt.Errorf("x: %w", own)); got != own {
		t.Errorf("toError(wrapped *Error) = %#v, want it as it is", got)
	}
	// As a client decodes it: data is a map[string]any.
	var decoded Error
	b, _ := json.Marshal(own)
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	if h := hint.Of(&decoded); h != "keep it out" {
		t.Errorf("decoded: hint.Of = %q", h)
	}
	if h := hint.Of(&Error{Code: 1, Message: "m", Data: []string{"hint"}}); h != "" {
		t.Errorf("data not a map: hint.Of = %q", h)
	}
}
