package control

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
)

// AutoTimeout bounds backend "auto"'s probing (a docker engine that does
// not answer, a bwrap that hangs), for every front end.
const AutoTimeout = 10 * time.Second

// Auto is the backend name that picks a registered backend.
const Auto = "auto"

// Choice is what a front end asks of Choose.
type Choice struct {
	// Backend is "auto" ("" means auto) or a registered name.
	Backend string
	// Reuse names a long-lived sandbox to reopen through Backend's
	// sandbox.Reopener instead of a fresh backend.
	Reuse            string
	Settings         sandbox.Settings
	AllowUnsandboxed bool
	// Probe checks a named backend can run here before it is returned
	// (a long-lived front end wants the failure at open, not at the
	// first command).
	Probe bool
	// HowLocal tells the user, in the front end's words, how to run
	// without a sandbox ("pass --sandbox local ..."): the end of the
	// hint when auto finds no usable backend.
	HowLocal string
	// RuntimeKey names, in the front end's words, where the OCI runtime
	// was asked for ("sandbox.docker.runtime" for the CLI's config; ""
	// for "the OCI runtime"): the message when auto cannot honour it.
	RuntimeKey string
}

// Chosen is a backend ready to run commands, why it was chosen, and how
// to release it.
type Chosen struct {
	Backend sandbox.Backend
	Entry   sandbox.BackendEntry
	Reason  string
	// Persistent is the reopened sandbox (Choice.Reuse), else nil.
	Persistent sandbox.Persistent
	closers    []func()
}

// Close releases the backend.
func (c *Chosen) Close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// Choose builds the backend asked for and runs its entry's Prepare (an
// image pulled or checked). "auto" takes the first registered backend
// that can run here, strongest isolation first, within AutoTimeout; it
// fails closed: an unsandboxed backend only with AllowUnsandboxed, and
// never when an OCI runtime is asked for.
func Choose(ctx context.Context, reg *sandbox.Registry, ch Choice) (*Chosen, error) {
	if ch.Reuse != "" {
		return reopen(ctx, reg, ch)
	}
	s := ch.Settings
	var c *Chosen
	if ch.Backend == "" || ch.Backend == Auto {
		b, e, why, err := PickAuto(ctx, reg, ch)
		if err != nil {
			return nil, err
		}
		if s.Runtime != "" && !e.Runtimes {
			sandbox.Close(b) // an OCI runtime was asked for: never quietly a weaker sandbox
			return nil, &Error{Kind: KindUnavailable, Err: sandbox.ErrUnavailable,
				Msg:  fmt.Sprintf("%s is %s, but the docker backend cannot run (%s)", cmp.Or(ch.RuntimeKey, "the OCI runtime"), s.Runtime, why),
				Help: fmt.Sprintf("fix docker (see `gatebridge doctor`), or unset %s to let auto pick another backend", cmp.Or(ch.RuntimeKey, "the OCI runtime"))}
		}
		c = &Chosen{Backend: b, Entry: e, Reason: "auto: " + why}
	} else {
		e, err := reg.Lookup(ch.Backend)
		if err != nil {
			return nil, &Error{Kind: KindInvalid, Field: "backend", Msg: fmt.Sprintf("%q: %v (or \"auto\")", "backend", err), Err: err}
		}
		b, err := e.New(s)
		if err != nil {
			return nil, err
		}
		c = &Chosen{Backend: b, Entry: e}
		if ch.Probe {
			if err := e.Usable(ctx, b); err != nil {
				sandbox.Close(b)
				return nil, err
			}
		}
	}
	b := c.Backend
	c.closers = append(c.closers, func() { sandbox.Close(b) })
	if c.Entry.Prepare != nil {
		if err := c.Entry.Prepare(ctx, b); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// ErrNoSandbox is auto finding no usable backend (and not allowed an
// unsandboxed one); it is a sandbox.ErrUnavailable.
var ErrNoSandbox = fmt.Errorf("%w: no sandbox is usable", sandbox.ErrUnavailable)

// PickAuto is what "auto" picks, without preparing it: the first
// registered backend that can run here, strongest isolation first,
// within AutoTimeout, and why. No usable one is an *Error that is
// ErrNoSandbox, with the hint.
func PickAuto(ctx context.Context, reg *sandbox.Registry, ch Choice) (sandbox.Backend, sandbox.BackendEntry, string, error) {
	cctx, cancel := context.WithTimeout(ctx, AutoTimeout)
	defer cancel()
	b, e, why, err := reg.Auto(cctx, ch.Settings, ch.AllowUnsandboxed)
	if err != nil {
		if ctx.Err() != nil {
			return nil, e, why, context.Cause(ctx)
		}
		return nil, e, why, &Error{Kind: KindUnavailable, Msg: fmt.Sprintf("no sandbox is usable (%s)", why),
			Err:  fmt.Errorf("%w (%w)", ErrNoSandbox, err),
			Help: "install bubblewrap, or start Docker with the image present (make test-image); to run on the host without a sandbox, " + ch.HowLocal}
	}
	return b, e, why, nil
}

// reopen is a long-lived sandbox opened again by name.
func reopen(ctx context.Context, reg *sandbox.Registry, ch Choice) (*Chosen, error) {
	e, err := reg.Lookup(ch.Backend)
	if err != nil {
		return nil, err
	}
	b, err := e.New(ch.Settings)
	if err != nil {
		return nil, err
	}
	r, ok := b.(sandbox.Reopener)
	if !ok {
		sandbox.Close(b)
		return nil, errorf(KindInvalid, "backend %s cannot reopen a sandbox by name", e.Name)
	}
	p, err := r.OpenSandbox(ctx, ch.Reuse)
	if err != nil {
		sandbox.Close(b)
		return nil, err
	}
	return &Chosen{Backend: p, Entry: e, Persistent: p, Reason: "persistent sandbox " + ch.Reuse,
		closers: []func(){func() { sandbox.Close(b) }}}, nil
}
