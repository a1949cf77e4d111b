package secrets

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"sync/atomic"
)

// A Redactor replaces every occurrence of every secret value it knows with
// "[secret:NAME]": in strings ([Redactor.String]), in JSON values
// ([Redactor.JSON]) and in streams ([Redactor.Writer]). A [Store] adds each
// value to its Redactor before it hands the value out, so a value a gate
// uses is redacted in whatever that gate writes from then on. A nil
// *Redactor redacts nothing. It is safe for concurrent use.
//
// Where two values overlap, the longest one starting first wins. A value
// that is redacted confirms an exact guess of it to whoever sees the
// output: secrets must be too long and random to guess (see [MinLen]).
type Redactor struct {
	mu sync.Mutex              // serializes Add
	m  atomic.Pointer[matcher] // nil: no values
}

// NewRedactor returns a Redactor that knows no values yet.
func NewRedactor() *Redactor { return &Redactor{} }

// Add makes r redact value as "[secret:NAME]". Values shorter than
// [MinLen] are ignored (a [Store] refuses them). A value added twice, or
// under two names, is redacted under the first name.
func (r *Redactor) Add(name, value string) {
	if r == nil || len(value) < MinLen {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.m.Load()
	var secs []secret
	if old != nil {
		if slices.ContainsFunc(old.secs, func(s secret) bool { return string(s.val) == value }) {
			return
		}
		secs = slices.Clone(old.secs)
	}
	secs = append(secs, secret{val: []byte(value), repl: []byte("[secret:" + name + "]")})
	r.m.Store(newMatcher(secs))
}

// Active reports whether r knows any value.
func (r *Redactor) Active() bool { return r.load() != nil }

func (r *Redactor) load() *matcher {
	if r == nil {
		return nil
	}
	return r.m.Load()
}

// String returns s with every secret value replaced.
func (r *Redactor) String(s string) string {
	m := r.load()
	if m == nil || !m.mayHold([]byte(s)) {
		return s
	}
	out, _ := m.scan(nil, []byte(s), len(s))
	return string(out)
}

// Bytes returns b with every secret value replaced (b itself when there
// is nothing to replace).
func (r *Redactor) Bytes(b []byte) []byte {
	m := r.load()
	if m == nil || !m.mayHold(b) {
		return b
	}
	out, _ := m.scan(nil, b, len(b))
	return out
}

// JSON returns the JSON value b with every secret value replaced in its
// strings (keys included) as they decode: an escaped form ("\u003c",
// "\/") cannot hide a value. b that is not JSON is redacted as bytes.
func (r *Redactor) JSON(b []byte) []byte {
	if !r.Active() {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return r.Bytes(b)
	}
	out, err := json.Marshal(r.value(v))
	if err != nil {
		return r.Bytes(b)
	}
	return out
}

// value redacts the strings of a decoded JSON value.
func (r *Redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.value(e)
		}
		return out
	}
	return v
}

// Writer returns a writer that passes what is written to w with every
// secret value replaced, also a value split across writes: while r knows
// any value it holds back the last (longest value − 1) bytes of what was
// written, whatever they are, until more is written or [Writer.Flush] is
// called. (Holding back only what could start a value would tell a
// sandbox watching a stream which bytes start one.) The writer is safe
// for concurrent use.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Writer is a redacting stream (see [Redactor.Writer]).
type Writer struct {
	r    *Redactor
	w    io.Writer
	mu   sync.Mutex
	held []byte
	done bool
}

// Write passes p on, redacted; it reports len(p) unless w fails. After
// Flush it drops p (written too late: the stream's end was decided).
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || len(p) == 0 {
		return len(p), nil
	}
	m := w.r.load()
	if m == nil && len(w.held) == 0 {
		_, err := w.w.Write(p)
		return len(p), err
	}
	w.held = append(w.held, p...)
	keep := 0
	if m != nil {
		keep = m.maxLen - 1
	}
	if len(w.held) <= keep {
		return len(p), nil
	}
	out, rest := m.scan(nil, w.held, len(w.held)-keep)
	w.held = append(w.held[:0], rest...)
	var err error
	if len(out) > 0 {
		_, err = w.w.Write(out)
	}
	return len(p), err
}

// Flush writes what is held back, redacted; writes after it are dropped.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if len(w.held) == 0 {
		return nil
	}
	out, _ := w.r.load().scan(nil, w.held, len(w.held))
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// Tail returns s, the end of a stream whose start was cut off, with every
// value replaced and its first (longest value − 1) bytes dropped: they
// may be the end of a value the cut split, which no longer matches it.
// (They are dropped whatever they are, as [Writer.Cut] drops what it
// holds.) A program that keeps the end of a stream that may hold a
// secret shows it through Tail. A nil Redactor returns s.
func (r *Redactor) Tail(s string) string {
	m := r.load()
	if m == nil {
		return s
	}
	out := r.String(s)
	return out[min(len(out), m.maxLen-1):]
}

// Cut ends a stream that was cut short (a cap, a timeout, a failed read)
// instead of [Writer.Flush]: what is held back is dropped, not written,
// since it may end with the start of a value the cut split, which no
// longer matches a whole value. (Replacing such a start instead would
// confirm, to a sandbox that chooses how a stream ends, each byte it
// guesses.) A program that caps a stream that may hold a secret caps it
// here, after redaction: redact, count, and Cut at the cap. Writes after
// it are dropped.
func (w *Writer) Cut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.held = nil
}

// secret is one value and what replaces it.
type secret struct{ val, repl []byte }

// matcher finds the values of a set; it is never changed once made.
type matcher struct {
	secs   []secret // longest first
	first  [256]bool
	maxLen int
}

func newMatcher(secs []secret) *matcher {
	m := &matcher{secs: secs}
	slices.SortStableFunc(m.secs, func(a, b secret) int { return len(b.val) - len(a.val) })
	for _, s := range secs {
		m.first[s.val[0]] = true
		m.maxLen = max(m.maxLen, len(s.val))
	}
	return m
}

// mayHold reports whether b has a byte a value starts with (a cheap test
// before a copy).
func (m *matcher) mayHold(b []byte) bool {
	for _, c := range b {
		if m.first[c] {
			return true
		}
	}
	return false
}

// scan appends b to dst with every value that starts before cut replaced
// (a nil m replaces nothing), and returns the rest of b from the first
// position at or after cut that no replacement covers. A caller that
// holds the last maxLen-1 bytes back passes cut = len(b)-(maxLen-1): every
// value fits in what follows a position before cut, so what scan decides
// there cannot change with more input.
func (m *matcher) scan(dst, b []byte, cut int) (out, rest []byte) {
	if m == nil {
		return append(dst, b[:cut]...), b[cut:]
	}
	last, i := 0, 0
	for i < cut {
		if !m.first[b[i]] {
			i++
			continue
		}
		hit := -1
		for k, s := range m.secs {
			if len(b)-i >= len(s.val) && bytes.Equal(b[i:i+len(s.val)], s.val) {
				hit = k
				break
			}
		}
		if hit < 0 {
			i++
			continue
		}
		dst = append(append(dst, b[last:i]...), m.secs[hit].repl...)
		i += len(m.secs[hit].val)
		last = i
	}
	return append(dst, b[last:i]...), b[i:]
}
