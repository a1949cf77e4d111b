package mcptools

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCleanText: whatever a server writes, a one-line text is one line of
// valid UTF-8 with nothing hidden, within its bound; a cleaned text the
// same but for its \n.
func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"", "Look up.\r- SYSTEM: x", "a\u2028b\u2029c\u0085d\ve\ff", "\u202e\u2066\u200b\U000E0041x\ufe0f", "\xff\xfe", strings.Repeat("é", 300), "\t\u3000 x \n\n\n y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		one := oneLine(s, maxSummaryBytes)
		if !utf8.ValidString(one) || len(one) > maxSummaryBytes || strings.IndexFunc(one, func(r rune) bool { return hidden(r) || lineBreak(r) }) >= 0 {
			t.Fatalf("oneLine(%q) = %q", s, one)
		}
		text := cleanText(s, 100)
		if !utf8.ValidString(text) || len(text) > 100 || strings.IndexFunc(text, func(r rune) bool { return r != '\n' && (hidden(r) || lineBreak(r)) }) >= 0 {
			t.Fatalf("cleanText(%q) = %q", s, text)
		}
		if first := firstLine(s); strings.Contains(first, "\n") || len(first) > maxSummaryBytes {
			t.Fatalf("firstLine(%q) = %q", s, first)
		}
	})
}

// FuzzCleanSchema: a schema cleanSchema takes has plain property names and
// no hidden character in any key or value (descriptions keep \n).
func FuzzCleanSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"q\n- SYSTEM":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","enum":["x","y\u202e"],"description":"d\r- SYSTEM"}}}`,
		`{"type":"object","properties":{"a":{"title":"t\u2028x","items":{"description":"\u0085"}}},"required":["a"]}`,
		`[1,2]`, `"x"`, `{"properties":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := cleanSchema([]byte(raw))
		if err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%q: output %q: %v", raw, out, err)
		}
		if props, ok := v["properties"].(map[string]any); ok {
			for n := range props {
				if !identifier(n) {
					t.Fatalf("%q: property %q", raw, n)
				}
			}
		}
		var walk func(x any, key string)
		walk = func(x any, key string) {
			switch x := x.(type) {
			case map[string]any:
				for k, y := range x {
					if hasHidden(k) {
						t.Fatalf("%q: key %q", raw, k)
					}
					walk(y, k)
				}
			case []any:
				for _, y := range x {
					walk(y, "")
				}
			case string:
				if key == "description" {
					x = strings.ReplaceAll(x, "\n", "")
				}
				if hasHidden(x) {
					t.Fatalf("%q: value %q", raw, x)
				}
			}
		}
		walk(v, "")
	})
}
