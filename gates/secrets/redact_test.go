package secrets

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

const tok = "ghp_S3cr3tT0k3nValue"

func testRedactor() *Redactor {
	r := NewRedactor()
	r.Add("gh", tok)
	r.Add("db", "hunter2hunter2")
	return r
}

// A secret split across two (or more) writes of a stream is still
// redacted: every split point of a text holding it, streamed, gives what
// redacting the whole text gives, and never the value.
func TestWriterSplitAcrossWrites(t *testing.T) {
	r := testRedactor()
	text := "token=" + tok + "\npass hunter2hunter2 and " + tok + tok + " end g"
	want := r.String(text)
	if strings.Contains(want, tok) || strings.Contains(want, "hunter2hunter2") || strings.Count(want, "[secret:gh]") != 3 || !strings.Contains(want, "[secret:db]") {
		t.Fatalf("String = %q", want)
	}
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j += 3 {
			var out bytes.Buffer
			w := r.Writer(&out)
			for _, part := range []string{text[:i], text[i:j], text[j:]} {
				w.Write([]byte(part))
				if strings.Contains(out.String(), tok) || strings.Contains(out.String(), "hunter2hunter2") {
					t.Fatalf("split %d/%d: a value went out: %q", i, j, out.String())
				}
			}
			w.Flush()
			if out.String() != want {
				t.Fatalf("split %d/%d: got %q, want %q", i, j, out.String(), want)
			}
		}
	}
}

// Byte by byte, and in random chunks.
func TestWriterRandomChunks(t *testing.T) {
	r := testRedactor()
	rng := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	for range 200 {
		switch rng.IntN(4) {
		case 0:
			sb.WriteString(tok)
		case 1:
			sb.WriteString(tok[:rng.IntN(len(tok))])
		default:
			sb.WriteString("some text ")
		}
	}
	text := sb.String()
	want := r.String(text)
	for range 50 {
		var out bytes.Buffer
		w := r.Writer(&out)
		for rest := text; rest != ""; {
			n := min(1+rng.IntN(2*len(tok)), len(rest))
			w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		w.Flush()
		if out.String() != want {
			t.Fatalf("chunked: got %q, want %q", out.String(), want)
		}
	}
}

// What the writer holds back does not depend on what was written: a tail
// that starts a secret is held no longer than one that does not (else a
// sandbox watching a stream could learn a secret byte by byte).
func TestWriterHoldsRegardlessOfContent(t *testing.T) {
	r := testRedactor()
	for _, tail := range []string{"g", "gh", "ghp_S3cr", "x", "xx", "xxxxxxxx"} {
		var out bytes.Buffer
		w := r.Writer(&out)
		w.Write([]byte(strings.Repeat("a", 100) + tail))
		if got, want := out.Len(), 100+len(tail)-(len(tok)-1); got != want {
			t.Errorf("tail %q: %d bytes out, want %d", tail, got, want)
		}
	}
}

// The longest value wins where two overlap; a value added while a stream
// runs is redacted in what is written after.
func TestRedactOverlapAndLateValue(t *testing.T) {
	r := NewRedactor()
	r.Add("short", "abcdefgh")
	r.Add("long", "abcdefghijkl")
	if got := r.String("xabcdefghijkly abcdefghx"); got != "x[secret:long]y [secret:short]x" {
		t.Errorf("overlap: %q", got)
	}
	var out bytes.Buffer
	w := r.Writer(&out)
	w.Write([]byte("late: "))
	r.Add("late", "LATEVALUE123")
	w.Write([]byte("LATEVAL"))
	w.Write([]byte("UE123 done"))
	w.Flush()
	if out.String() != "late: [secret:late] done" {
		t.Errorf("late value: %q", out.String())
	}
	// Too short to redact: ignored.
	r.Add("tiny", "abc")
	if r.String("abc") != "abc" {
		t.Error("a 3-byte value was redacted")
	}
}

// Writes after Flush are dropped (a gate that outlived its call); a nil
// or empty redactor passes everything through.
func TestWriterFlushAndNil(t *testing.T) {
	var out bytes.Buffer
	w := testRedactor().Writer(&out)
	w.Write([]byte("x " + tok[:5]))
	w.Flush()
	w.Write([]byte(tok[5:]))
	if out.String() != "x "+tok[:5] {
		t.Errorf("after flush: %q", out.String())
	}
	var nilR *Redactor
	out.Reset()
	w = nilR.Writer(&out)
	w.Write([]byte("plain"))
	if out.String() != "plain" || nilR.String(tok) != tok || nilR.Active() {
		t.Errorf("nil redactor: %q", out.String())
	}
}

// JSON: a value whose encoding differs from its bytes (json.Marshal
// escapes <, > and &) is redacted as it decodes.
func TestRedactJSON(t *testing.T) {
	r := NewRedactor()
	r.Add("html", "<a&b>secret")
	raw, _ := json.Marshal(map[string]any{"url": "https://x/?q=<a&b>secret", "n": 12345678901234567, "list": []any{"<a&b>secret"}})
	if bytes.Contains(raw, []byte("<a&b>secret")) {
		t.Fatal("test premise: json.Marshal escapes")
	}
	got := string(r.JSON(raw))
	if strings.Contains(got, `\u003ca\u0026b\u003esecret`) || strings.Count(got, "[secret:html]") != 2 || !strings.Contains(got, "12345678901234567") {
		t.Errorf("JSON = %s", got)
	}
}

// Streamed in any pieces, the output is what redacting the whole gives,
// and never holds a value.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("a "+tok+" b hunter2hunter2"), uint8(3), uint8(9))
	f.Add([]byte(tok[:7]+tok+tok[3:]), uint8(7), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		r := testRedactor()
		want := r.Bytes(data)
		var out bytes.Buffer
		w := r.Writer(&out)
		i, j := min(int(a), len(data)), min(int(a)+int(b), len(data))
		w.Write(data[:i])
		w.Write(data[i:j])
		w.Write(data[j:])
		w.Flush()
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("streamed %q, whole %q", out.Bytes(), want)
		}
		if bytes.Contains(want, []byte(tok)) || bytes.Contains(want, []byte("hunter2hunter2")) {
			t.Fatalf("a value is left in %q", want)
		}
	})
}
