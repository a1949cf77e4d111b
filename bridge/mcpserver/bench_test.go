package mcpserver

import (
	"testing"
)

// BenchmarkBashCall is one foreground bash call (echo) through the SDK's
// client and server over in-memory transports, on the local backend.
func BenchmarkBashCall(b *testing.B) {
	cs, _ := mcpSession(b, Options{}, nil)
	b.ResetTimer()
	for b.Loop() {
		if res, out := bash(b, cs, map[string]any{"command": "echo hi"}); res.IsError || out.Stdout != "hi\n" {
			b.Fatalf("%q", text(res))
		}
	}
}
