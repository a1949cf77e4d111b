package rpc_test

import "testing"

// With the bridge's SubmitLines (serve: bridge.submit_lines), a process
// that prints "SUBMIT: ANSWER" and calls no submit exits with that answer.
func TestProcessExitedSubmitLine(t *testing.T) {
	for _, on := range []bool{true, false} {
		opts := testOptions(t)
		opts.Bridge.SubmitLines = on
		c := newClient(t, opts)
		c.openSandbox("sb", "local", false)
		o := c.Run("sb", "p", nil, "sh", "-c", `echo "SUBMIT: 7"`)
		switch {
		case string(o.Stdout) != "SUBMIT: 7\n":
			t.Errorf("on=%v: stdout %q", on, o.Stdout)
		case on && (o.Exited.Answer == nil || *o.Exited.Answer != "7"):
			t.Errorf("answer %v, want 7", o.Exited.Answer)
		case !on && o.Exited.Answer != nil:
			t.Errorf("off: answer %q, want none", *o.Exited.Answer)
		}
	}
}
