package secrets

import (
	"context"
	"fmt"
	"strings"
)

// refOpen starts a reference: ${secret:NAME}.
const refOpen = "${secret:"

// Mentions reports whether s holds something that looks like a reference,
// for the places that take none (argv, paths, URLs): a kind refuses it
// there rather than pass it on as text.
func Mentions(s string) bool { return strings.Contains(s, refOpen) }

// Refs returns the names s references, in order, or an error for a
// reference that is not ${secret:NAME} with a valid name.
func Refs(s string) ([]string, error) {
	var names []string
	_, err := expand(s, func(name string) (string, error) {
		names = append(names, name)
		return "", nil
	})
	return names, err
}

// Expand returns s with each ${secret:NAME} replaced by the value of the
// secret (see [Store.Get]; untrusted as there). A string without a
// reference is returned as it is, even with a nil Store.
func (s *Store) Expand(ctx context.Context, str string, untrusted []string) (string, error) {
	if !Mentions(str) {
		return str, nil
	}
	return expand(str, func(name string) (string, error) { return s.Get(ctx, name, untrusted) })
}

// ExpandAll expands each string of list (see [Store.Expand]).
func (s *Store) ExpandAll(ctx context.Context, list []string, untrusted []string) ([]string, error) {
	out := make([]string, len(list))
	for i, v := range list {
		var err error
		if out[i], err = s.Expand(ctx, v, untrusted); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Resolve checks that every reference in list names a secret of s that
// can be read now (reading it), so that a bad one is a config error when
// the gates are made, not a failure at the first call.
func (s *Store) Resolve(ctx context.Context, list []string, untrusted []string) error {
	_, err := s.ExpandAll(ctx, list, untrusted)
	return err
}

// expand replaces each reference in s with what value returns for it.
func expand(s string, value func(name string) (string, error)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, refOpen)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+len(refOpen):]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return "", &syntaxError{fmt.Sprintf("unterminated reference %q", cut(s[i:], 40))}
		}
		name := rest[:j]
		if !nameRE.MatchString(name) {
			return "", &syntaxError{fmt.Sprintf("reference %q: %q is not a secret name", cut(s[i:i+len(refOpen)+j+1], 60), name)}
		}
		v, err := value(name)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = rest[j+1:]
	}
}

// syntaxError is a malformed reference.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }
func (e *syntaxError) Hint() string {
	return "write ${secret:NAME}, NAME a secret declared under secrets: (lower-case letters, digits and _)"
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
