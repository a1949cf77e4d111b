// Package suggest finds the names nearest to a misspelt one, for the
// "did you mean" hints of the CLI (flags, commands, config keys).
//
// Nearness is the optimal-string-alignment distance (Levenshtein with
// adjacent transpositions: "tiemout" is one edit from "timeout"), case
// folded, within a third of the word's length (at least 1); a word that
// is the start of exactly one name (3 bytes or more) is near it too.
package suggest

import (
	"slices"
	"strings"
)

// Distance is the optimal-string-alignment distance between a and b, in
// runes: insertions, deletions, substitutions and swaps of two adjacent
// runes, each counting 1.
func Distance(a, b string) int {
	r, s := []rune(a), []rune(b)
	// d[i][j] is the distance between r[:i] and s[:j].
	d := make([][]int, len(r)+1)
	for i := range d {
		d[i] = make([]int, len(s)+1)
		d[i][0] = i
	}
	for j := range s {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(r); i++ {
		for j := 1; j <= len(s); j++ {
			cost := 1
			if r[i-1] == s[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && r[i-1] == s[j-2] && r[i-2] == s[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(r)][len(s)]
}

// Nearest is the names nearest to word (more than one on a tie, sorted),
// or nil when none is near enough. word itself is never suggested.
func Nearest(word string, names []string) []string {
	w := strings.ToLower(word)
	limit := max(1, len([]rune(w))/3)
	best, out := limit+1, []string(nil)
	var prefixed []string
	for _, n := range names {
		if n == word {
			continue
		}
		if len(w) >= 3 && strings.HasPrefix(strings.ToLower(n), w) {
			prefixed = append(prefixed, n)
		}
		switch d := Distance(w, strings.ToLower(n)); {
		case d < best:
			best, out = d, []string{n}
		case d == best:
			out = append(out, n)
		}
	}
	if out == nil && len(prefixed) == 1 {
		out = prefixed
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DidYouMean is "did you mean --sandbox?" (or "did you mean a or b?")
// for the names nearest to word, each shown with prefix before it; ""
// when none is near.
func DidYouMean(prefix, word string, names []string) string {
	m := Nearest(word, names)
	for i := range m {
		m[i] = prefix + m[i]
	}
	return Phrase(m)
}

// Phrase is "did you mean a?", "did you mean a or b?" (at most three),
// or "" for none.
func Phrase(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "did you mean " + strings.Join(names[:min(len(names), 3)], " or ") + "?"
}

// Key is the dotted keys nearest to the unknown key section+word, where
// keys are every known key and section ends in "." (or is "" at the
// top): the keys of the same section nearest to word; else the keys of
// other sections whose last part is word (a key put in the wrong
// section). "sandbox.bakend" gives "sandbox.backend", a top-level
// "image" gives "sandbox.docker.image".
func Key(keys []string, section, word string) []string {
	var siblings []string
	for _, k := range keys {
		if rest, ok := strings.CutPrefix(k, section); ok && !strings.Contains(rest, ".") {
			siblings = append(siblings, rest)
		}
	}
	out := Nearest(word, siblings)
	for i := range out {
		out[i] = section + out[i]
	}
	if len(out) > 0 {
		return out
	}
	for _, k := range keys {
		if strings.HasSuffix(k, "."+word) && k != section+word {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
