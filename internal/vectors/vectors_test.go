package vectors

import "testing"

// TestLoad reads every vector file, and shows that a value outside the
// portable subset is refused.
func TestLoad(t *testing.T) {
	for _, name := range []string{"argv", "exit", "ack"} {
		comment, vs, err := Load(name)
		if err != nil || comment == "" || len(vs) < 5 {
			t.Errorf("Load(%s): %d vectors, %v", name, len(vs), err)
		}
	}
	for _, bad := range []string{`"a\0"`, `"\u00e9"`, `"tab	"`, `"é"`, `x`, `"unterminated`} {
		if _, err := value(bad); err == nil {
			t.Errorf("value(%s) accepted", bad)
		}
	}
	if v, err := value(`"a\x00\xff\n\t\\\""`); err != nil || v != "a\x00\xff\n\t\\\"" {
		t.Errorf("value: %q, %v", v, err)
	}
}
