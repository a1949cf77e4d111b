package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3},
		{"sandbx", "sandbox", 1}, {"bakend", "backend", 1},
		{"tiemout", "timeout", 1}, // a swap is one edit
		{"kitten", "sitting", 3},
		{"café", "cafe", 1}, // runes, not bytes
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	flags := []string{"sandbox", "timeout", "workspace", "writable-workspace", "json", "image", "reuse", "watch", "config"}
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"sandbx", []string{"sandbox"}},
		{"SANDBOX", []string{"sandbox"}},
		{"tiemout", []string{"timeout"}},
		{"jsno", []string{"json"}},
		{"writable", []string{"writable-workspace"}}, // the start of one name
		{"w", nil},       // too short to guess
		{"bogus", nil},   // nothing near
		{"sandbox", nil}, // itself is not a suggestion
		{"workspac", []string{"workspace"}},
	} {
		if got := Nearest(tc.word, flags); !slices.Equal(got, tc.want) {
			t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Nearest("cat", []string{"bat", "hat", "dog"}); !slices.Equal(got, []string{"bat", "hat"}) {
		t.Errorf("tie: %q", got)
	}
}

func TestDidYouMean(t *testing.T) {
	if got := DidYouMean("--", "sandbx", []string{"sandbox", "json"}); got != "did you mean --sandbox?" {
		t.Errorf("got %q", got)
	}
	if got := DidYouMean("", "cat", []string{"bat", "hat"}); got != "did you mean bat or hat?" {
		t.Errorf("got %q", got)
	}
	if got := DidYouMean("--", "zzzzzz", []string{"sandbox"}); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestKey(t *testing.T) {
	keys := []string{"sandbox", "sandbox.backend", "sandbox.timeout", "sandbox.docker", "sandbox.docker.image",
		"bridge", "bridge.limits", "bridge.limits.max_calls", "mcp", "mcp.servers", "mcp.servers.*", "mcp.servers.*.command", "mcp.servers.*.timeout"}
	for _, tc := range []struct {
		section, word string
		want          []string
	}{
		{"sandbox.", "bakend", []string{"sandbox.backend"}},
		{"", "sandbx", []string{"sandbox"}},
		{"", "image", []string{"sandbox.docker.image"}},                       // in the wrong section
		{"sandbox.", "image", []string{"sandbox.docker.image"}},               // one level too high
		{"bridge.limits.", "max_call", []string{"bridge.limits.max_calls"}},   // the start of one key
		{"mcp.servers.*.", "comand", []string{"mcp.servers.*.command"}},       // under a named section
		{"", "timeout", []string{"mcp.servers.*.timeout", "sandbox.timeout"}}, // every section that has it
		{"sandbox.", "nothing_like_it", nil},
	} {
		if got := Key(keys, tc.section, tc.word); !slices.Equal(got, tc.want) {
			t.Errorf("Key(%q, %q) = %q, want %q", tc.section, tc.word, got, tc.want)
		}
	}
}
