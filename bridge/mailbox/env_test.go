package mailbox

import (
	"slices"
	"testing"
)

func TestDirsEnv(t *testing.T) {
	got := DirsEnv(LayoutAt("/s"))
	want := []string{"GATEBRIDGE_CALLS_DIR=/s/calls", "GATEBRIDGE_RESPONSES_DIR=/s/responses", "GATEBRIDGE_SESSION_DIR=/s"}
	if !slices.Equal(got, want) {
		t.Errorf("DirsEnv = %q, want %q", got, want)
	}
	if got := DirsEnv(Layout{Calls: "/c"}); !slices.Equal(got, []string{"GATEBRIDGE_CALLS_DIR=/c"}) {
		t.Errorf("DirsEnv leaves out empty paths: %q", got)
	}
}
