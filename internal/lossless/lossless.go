// Package lossless is gatebridge's one rule for the strings that come from
// a sandbox (a gate call's arguments, the caller's working directory, the
// answer given to submit, a command's output): they may hold any byte but
// NUL and need not be UTF-8, so "\xff" and "\xfe" are different
// arguments, and whoever reads them must be able to tell.
//
// # For people
//
// Error messages, logs, listings and prompts show such a string with
// [Quote]: Go's quoted form ([strconv.Quote]), in which a byte that is not
// UTF-8 reads \xff, a control character \n or \x1b, and a literal
// backslash is escaped too (\\), so an argument typed as the four
// characters \xff reads "\\xff" and cannot pass for the byte 0xff, and a
// newline or a terminal escape cannot break or forge a line. [QuoteCap]
// shortens a long one.
//
// # For machines
//
// JSON (run --json, the audit log, the JSON-RPC protocol, MCP structured
// content) carries such a string in its field as is when it is valid
// UTF-8. When it is not, the field still holds a string (each bad byte
// replaced by U+FFFD, as every JSON encoder does: for display only) and a
// sibling field, named after it with "Base64" ("_base64" where the
// surface's names are snake_case), holds its exact bytes in standard
// base64. For a list of strings the sibling is a list of the same length,
// with null for each element that is valid UTF-8; a sibling is left out
// when it has nothing to say. A client decodes with:
//
//	exact[i] = base64(sibling[i]) if sibling and sibling[i] != null else utf8(field[i])
//
// [Bytes] and [List] make the sibling (a []byte marshals as base64, a nil
// one in a list as null); [String] and [Strings] decode it. The rule is
// documented once, in docs/json.md ("Bytes that are not UTF-8").
package lossless

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Quote returns s as a person should see it: Go's double-quoted form, in
// which every byte that is not UTF-8, every control or non-printing
// character, the double quote and the backslash itself are escaped.
func Quote(s string) string { return strconv.Quote(s) }

// QuoteCap is [Quote] of at most the first n bytes of s (cut between
// characters, see [Cut]), followed by "…" when s was longer.
func QuoteCap(s string, n int) string {
	if len(s) > n {
		return strconv.Quote(Cut(s, n)) + "…"
	}
	return strconv.Quote(s)
}

// Cut returns the longest prefix of s of at most n bytes that does not
// end inside a valid UTF-8 sequence, so that cutting a valid string keeps
// it valid. A byte that is not UTF-8 is cut like any character.
func Cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	// Find the start of the character that holds byte n-1; if that
	// character goes on past the cut, cut before it.
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || size > 1) && i+size > n {
				return s[:i]
			}
			break
		}
	}
	return s[:n]
}

// Bytes returns what the sibling field of s carries: nil when s is valid
// UTF-8 (its own field carries it exactly), else its bytes.
func Bytes(s string) []byte {
	if utf8.ValidString(s) {
		return nil
	}
	return []byte(s)
}

// List returns the sibling of a list of strings: nil when every element
// is valid UTF-8, else one entry per element, nil (JSON null) for those
// that are.
func List(ss []string) [][]byte {
	var out [][]byte
	for i, s := range ss {
		if utf8.ValidString(s) {
			continue
		}
		if out == nil {
			out = make([][]byte, len(ss))
		}
		out[i] = []byte(s)
	}
	return out
}

// String is the exact string a field s and its sibling b carry.
func String(s string, b []byte) string {
	if b != nil {
		return string(b)
	}
	return s
}

// Strings is the exact list a field ss and its sibling bs carry; a sibling
// whose length differs from the field's is an error.
func Strings(ss []string, bs [][]byte) ([]string, error) {
	if bs == nil {
		return ss, nil
	}
	if len(bs) != len(ss) {
		return nil, fmt.Errorf("lossless: %d strings but %d entries in their base64 sibling", len(ss), len(bs))
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = String(s, bs[i])
	}
	return out, nil
}
