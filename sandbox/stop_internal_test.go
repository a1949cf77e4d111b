package sandbox

import (
	"testing"
	"time"
)

// TestKillGraceDefault: a zero or negative Spec.KillGrace is the default
// grace, as every backend had it.
func TestKillGraceDefault(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0: DefaultKillGrace, -time.Second: DefaultKillGrace, 5 * time.Millisecond: 5 * time.Millisecond,
	} {
		if got := killGrace(&Spec{KillGrace: in}); got != want {
			t.Errorf("killGrace(%v) = %v, want %v", in, got, want)
		}
		if got := NewStopper(t.Context(), &Spec{KillGrace: in}, nil, nil).grace; got != want {
			t.Errorf("NewStopper with KillGrace %v: grace %v, want %v", in, got, want)
		}
	}
}
