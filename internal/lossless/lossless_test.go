package lossless

import (
	"encoding/json"
	"testing"
)

// A literal backslash sequence typed by the sandbox ("\\xff", four
// characters) must not read like the byte it spells, nor two different
// bytes like each other.
func TestQuoteCannotBeForged(t *testing.T) {
	raw, typed, other := "\xff", `\xff`, "\xfe"
	if Quote(raw) == Quote(typed) || Quote(raw) == Quote(other) {
		t.Fatalf("indistinguishable: %s %s %s", Quote(raw), Quote(typed), Quote(other))
	}
	if Quote(typed) != `"\\xff"` || Quote(raw) != `"\xff"` {
		t.Fatalf("Quote: %s, %s", Quote(typed), Quote(raw))
	}
	if q := Quote("a\nb\x1b[31m"); q != `"a\nb\x1b[31m"` {
		t.Fatalf("control characters: %s", q)
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"aé", 2, "a"},                  // é is 2 bytes: not split
		{"a€b", 3, "a"},                 // € is 3 bytes
		{"a€b", 4, "a€"},                // whole
		{"\xff\xfe\xfd", 2, "\xff\xfe"}, // bad bytes cut like characters
		{"a\xe2\x82", 2, "a\xe2"},       // a truncated sequence is not a character
		{"abc", 0, ""},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	if q := QuoteCap("aéé", 2); q != `"a"…` {
		t.Errorf("QuoteCap: %s", q)
	}
}

// The JSON form keeps every byte: two arguments that differ only in a byte
// that is not UTF-8 come back different and exact.
func TestJSONRoundTrip(t *testing.T) {
	type msg struct {
		Args       []string `json:"args"`
		ArgsBase64 [][]byte `json:"argsBase64,omitempty"`
		Cwd        string   `json:"cwd"`
		CwdBase64  []byte   `json:"cwdBase64,omitempty"`
	}
	in := []string{"ok", "\xff", `\xff`, "caf\xe9", "é"}
	b, err := json.Marshal(msg{Args: in, ArgsBase64: List(in), Cwd: "/w/\xfe", CwdBase64: Bytes("/w/\xfe")})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"args":["ok","\ufffd","\\xff","caf\ufffd","é"],"argsBase64":[null,"/w==",null,"Y2Fm6Q==",null],"cwd":"/w/\ufffd","cwdBase64":"L3cv/g=="}`
	if string(b) != want {
		t.Fatalf("JSON\n got %s\nwant %s", b, want)
	}
	var out msg
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	got, err := Strings(out.Args, out.ArgsBase64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if got[i] != in[i] {
			t.Fatalf("arg %d: %q, want %q", i, got[i], in[i])
		}
	}
	if c := String(out.Cwd, out.CwdBase64); c != "/w/\xfe" {
		t.Fatalf("cwd %q", c)
	}
	// All valid: no sibling at all.
	if List([]string{"a", "é"}) != nil || Bytes("é") != nil {
		t.Fatal("a sibling for valid UTF-8")
	}
	b, _ = json.Marshal(msg{Args: []string{"a"}, ArgsBase64: List([]string{"a"})})
	if string(b) != `{"args":["a"],"cwd":""}` {
		t.Fatalf("valid: %s", b)
	}
	if _, err := Strings([]string{"a"}, [][]byte{nil, nil}); err == nil {
		t.Fatal("a sibling of the wrong length was accepted")
	}
}
