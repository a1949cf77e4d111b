package sandbox

import (
	"context"
	"errors"
	"fmt"
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
	var notes []string
	var errs []error
	for _, c := range candidates {
		if c == nil {
			continue
		}
		if ch, ok := c.(Checker); ok {
			if err := ch.Check(ctx); err != nil {
				if ctx.Err() != nil {
					return nil, strings.Join(notes, "; "), fmt.Errorf("sandbox: choose backend: %w", ctx.Err())
				}
				notes = append(notes, c.Name()+": "+reason(c.Name(), err))
				errs = append(errs, err)
				continue
			}
		}
		notes = append(notes, c.Name()+": usable")
		return c, strings.Join(notes, "; "), nil
	}
	why = strings.Join(notes, "; ")
	if len(candidates) == 0 {
		why = "no candidates"
	}
	return nil, why, fmt.Errorf("sandbox: no usable backend (%s): %w", why, errors.Join(append([]error{ErrUnavailable}, errs...)...))
}

// reason is err without the "name: " prefix an [*Error] carries.
func reason(name string, err error) string {
	var e *Error
	if errors.As(err, &e) && e.Err != nil {
		return strings.TrimPrefix(e.Err.Error(), ErrUnavailable.Error()+": ")
	}
	return strings.TrimPrefix(err.Error(), name+": ")
}
