package sandbox

import (
	"context"
	"errors"
	"strings"
)

// Auto returns the first candidate that can run here: one whose Check (see
// [Checker]) passes, or that has no Check. why tells what was tried, for a
// log line or `gatebridge doctor`, e.g.
//
//	docker: engine unreachable at unix:///var/run/docker.sock; bwrap: usable
//
// When none can run, err wraps [ErrUnavailable] and every candidate's error.
func Auto(ctx context.Context, candidates []Backend) (b Backend, why string, err error) {
	var entries []BackendEntry
	for _, c := range candidates {
		if c == nil {
			continue
		}
		e := BackendEntry{Name: c.Name(), New: func(Settings) (Backend, error) { return c, nil }}
		if ch, ok := c.(Checker); ok {
			e.Available = func(ctx context.Context, _ Backend) error { return ch.Check(ctx) }
		}
		entries = append(entries, e)
	}
	b, _, why, err = pick(ctx, Settings{}, entries, false)
	return b, why, err
}

// reason is err without the "name: " prefix an [*Error] carries.
func reason(name string, err error) string {
	var e *Error
	if errors.As(err, &e) && e.Err != nil {
		return strings.TrimPrefix(e.Err.Error(), ErrUnavailable.Error()+": ")
	}
	return strings.TrimPrefix(err.Error(), name+": ")
}
