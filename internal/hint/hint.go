// Package hint is gatebridge's one way for an error to say how to fix
// it. An error carries a hint by having a Hint method ([Carrier]); [Of]
// is the one reader. Every layer may implement the method (sandbox.Error,
// the CLI's config and usage errors, the JSON-RPC error with a "hint" in
// its data); only the printers read it, through [Of], so a hint reaches
// the user the same way whichever layer made it.
//
// A hint is a sentence for a person, printed on its own line after the
// error ("gatebridge: hint: ..."), or sent as the "hint" of a JSON-RPC
// error's data; the error itself says what went wrong.
package hint

// Carrier is an error that says how to fix it. Hint returns "" when it
// has nothing to say; [Of] then looks further down the chain.
type Carrier interface {
	error
	Hint() string
}

// Of returns the first non-empty hint on err's chain, in the order
// [errors.As] visits it (err first, then what it wraps, depth first
// through errors that wrap several), or "" when there is none. The
// outermost hint wins: a layer that wraps an error with a better hint
// replaces the one below.
func Of(err error) string {
	for err != nil {
		if c, ok := err.(interface{ Hint() string }); ok {
			if h := c.Hint(); h != "" {
				return h
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if h := Of(e); h != "" {
					return h
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// Hinted is an error with a hint ([Carrier]): Err, and Help, how to fix
// it; it unwraps to Err. [With] makes one; a package embeds it to give
// an error type of its own a hint.
type Hinted struct {
	Err  error
	Help string
}

func (e *Hinted) Error() string { return e.Err.Error() }
func (e *Hinted) Unwrap() error { return e.Err }

// Hint says how to fix it.
func (e *Hinted) Hint() string { return e.Help }

// With returns err with the hint h.
func With(err error, h string) error { return &Hinted{err, h} }
