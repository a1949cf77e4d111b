package mcptools

import (
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/gates"
)

// approval and tool_approval: a tool's own entry wins over its server's;
// a tool set to deny refuses its calls itself, on every front end.
func TestToolApproval(t *testing.T) {
	s := testServer("add", "echo", "fail")
	s.Approval = gates.ApprovalAsk
	s.ToolApproval = map[string]string{"add": gates.ApprovalDeny, "echo": gates.ApprovalNever}
	reg, _ := connect(t, s)
	for name, want := range map[string]string{"t_add": "deny", "t_echo": "never", "t_fail": "ask"} {
		g, _ := reg.Lookup(name)
		if got := g.(gates.ApprovalSetter).ApprovalSetting(); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
		if need := g.(gates.Approver).NeedsApproval(); need != (want == "ask") {
			t.Errorf("%s: NeedsApproval %v", name, need)
		}
	}
	code, out, errb := call(t, reg, "t_add", "", "a=1", "b=2")
	if code != gates.ExitDenied || out != "" || !strings.Contains(errb, "approval: deny") {
		t.Errorf("t_add (deny): exit %d, %q, %q", code, out, errb)
	}
}
