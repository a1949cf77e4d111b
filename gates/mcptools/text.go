package mcptools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a server says about its tools (names, titles, descriptions,
// property names, enum values) is untrusted: it reaches the wrappers, the
// gates' listings and a model's prompt. A description keeps its words but
// loses what could forge a line or hide text; a name or value that would
// need changing to be safe refuses the tool, since a changed name or value
// no longer means what the server checks.

// Bounds on what one tool may make us hold or print.
const (
	maxToolNameBytes    = 128     // MCP's own limit on a tool's name
	maxPropNameBytes    = 64      // a property name (key=value word)
	maxSummaryBytes     = 200     // a summary or a parameter's description: one line
	maxDescriptionBytes = 4 << 10 // a description (--help, the input schema)
	maxSchemaBytes      = 64 << 10
)

// hidden reports whether r is invisible or changes how the text around it
// reads: controls (C0, DEL, C1), format characters (bidi embeddings,
// overrides and isolates, zero-width characters, tag characters, soft
// hyphen), line and paragraph separators, private use characters,
// noncharacters, variation selectors and the Hangul fillers.
func hidden(r rune) bool {
	switch {
	case r < 0x20 || r >= 0x7f && r < 0xa0:
		return true
	case r < 0x7f:
		return false
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0 || r == 0x034f:
		return true
	case r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe:
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp, unicode.Variation_Selector)
}

// hasHidden reports whether s has a hidden character or is not UTF-8.
func hasHidden(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.IndexFunc(s, hidden) >= 0
}

// cleanText keeps the lines of s: line ends (\r\n and every lineBreak)
// become \n, tabs and other spaces a space, hidden characters go, bytes
// that are not UTF-8 become U+FFFD; trailing spaces and more than one
// blank line in a row go too. Cut at max bytes with "…".
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\r\n", "\n"), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if lineBreak(r) {
			return '\n'
		}
		return r
	}, s)
	var b strings.Builder
	blank := false
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRightFunc(strings.Map(space, line), unicode.IsSpace)
		if line == "" {
			blank = b.Len() > 0
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
			if blank {
				b.WriteString("\n")
			}
		}
		blank = false
		b.WriteString(line)
		if b.Len() > max {
			break
		}
	}
	return cut(b.String(), max)
}

// oneLine is cleanText on one line: every run of spaces and line ends is
// one space.
func oneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if lineBreak(r) {
			return ' '
		}
		return space(r)
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return cut(strings.Join(strings.Fields(s), " "), max)
}

// lineBreak reports whether r ends a line for a terminal or for Unicode:
// \n, \r, \v, \f, NEL, U+2028, U+2029.
func lineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// firstLine is the first line of s, cleaned: a summary.
func firstLine(s string) string {
	line, _, _ := strings.Cut(cleanText(s, maxDescriptionBytes), "\n")
	return cut(line, maxSummaryBytes)
}

// space maps a tab or another space to ' ' and drops hidden characters
// (line ends are the caller's).
func space(r rune) rune {
	switch {
	case r == '\t' || r != ' ' && unicode.Is(unicode.Zs, r):
		return ' '
	case hidden(r):
		return -1
	}
	return r
}

// cut shortens s to at most max bytes, ending it with "…" when it did.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimRightFunc(s, unicode.IsSpace) + "…"
}

// quoteName is a server-supplied name as a message shows it: quoted, in
// ASCII (no character can hide or forge a line), cut at 64 bytes.
func quoteName(s string) string {
	if len(s) > 64 {
		return strconv.QuoteToASCII(cut(strings.ToValidUTF8(s, "\uFFFD"), 64))
	}
	return strconv.QuoteToASCII(s)
}

// identifier reports whether a property name is a plain identifier: a
// letter or _, then letters, digits, _, - and ., at most
// maxPropNameBytes. Only such names appear in a usage line or a KEY=VALUE
// word.
func identifier(s string) bool {
	if s == "" || len(s) > maxPropNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' ||
			i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '.')
		if !ok {
			return false
		}
	}
	return true
}

// cleanSchema checks and cleans a tool's input schema: its properties and
// required names must be identifiers; no key anywhere, and no string value
// but a description or title (those are cleaned as text), may hold a
// hidden character: an enum value, a default or a type that would need
// changing refuses the tool. A title keeps its first line. The result is
// compact JSON.
func cleanSchema(raw []byte) (json.RawMessage, error) {
	if len(raw) > maxSchemaBytes {
		return nil, fmt.Errorf("its input schema is over %d bytes", maxSchemaBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("its input schema is not JSON: %v", err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("its input schema is not an object")
	}
	if props, ok := top["properties"].(map[string]any); ok {
		for n := range props {
			if !identifier(n) {
				return nil, fmt.Errorf("property %s is not a plain name (a letter or _, then letters, digits, _ - ., at most %d bytes)", quoteName(n), maxPropNameBytes)
			}
		}
	}
	if req, ok := top["required"].([]any); ok {
		for _, r := range req {
			if n, _ := r.(string); !identifier(n) {
				return nil, fmt.Errorf("required name %s is not a plain name", quoteName(fmt.Sprint(r)))
			}
		}
	}
	v, err := cleanValue(v, "")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("its input schema: %v", err)
	}
	return b, nil
}

// cleanValue cleans v, the value of key in a schema.
func cleanValue(v any, key string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if hasHidden(k) {
				return nil, fmt.Errorf("its input schema has a key with hidden or control characters: %s", quoteName(k))
			}
			x, err := cleanValue(x, k)
			if err != nil {
				return nil, err
			}
			v[k] = x
		}
	case []any:
		for i, x := range v {
			x, err := cleanValue(x, "")
			if err != nil {
				return nil, err
			}
			v[i] = x
		}
	case string:
		switch key {
		case "description":
			return cleanText(v, maxDescriptionBytes), nil
		case "title":
			return firstLine(v), nil
		}
		if hasHidden(v) {
			return nil, fmt.Errorf("its input schema has a value with hidden or control characters: %s", quoteName(v))
		}
	}
	return v, nil
}
