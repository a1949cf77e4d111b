package bridge

import (
	"strings"
	"testing"
)

// With SubmitLines, a line "SUBMIT: ANSWER" on stdout is the answer when
// no submit call was made.
func TestSubmitLines(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		off          bool
		want         *string
	}{
		{name: "line", script: `echo hello; echo "SUBMIT: 42"; echo bye`, want: ptr("42")},
		{name: "last wins", script: `echo "SUBMIT: 1"; echo "SUBMIT:2"`, want: ptr("2")},
		{name: "no newline, spaces, CR", script: `printf 'x\nSUBMIT:  a b \r'`, want: ptr("a b")},
		{name: "split across writes", script: `printf 'SUB'; sleep 0.05; printf 'MIT: late\n'`, want: ptr("late")},
		{name: "submit call wins", script: `echo "SUBMIT: line"; t_submit called; echo "SUBMIT: after"`, want: ptr("called")},
		{name: "not at the start", script: `echo "say SUBMIT: x"; echo " SUBMIT: y"`},
		{name: "stderr not read", script: `echo "SUBMIT: x" >&2`},
		{name: "off", script: `echo "SUBMIT: 42"`, off: true},
		{name: "too long", script: `printf 'SUBMIT: %0300d\n' 0`},
		{name: "long line, later answer", script: `printf '%0300d\n' 0; echo "SUBMIT: ok"`, want: ptr("ok")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, Config{SubmitLines: !tc.off, Limits: Limits{MaxArgBytes: 100}}, tc.script)
			switch {
			case tc.want == nil && res.Answer != nil:
				t.Errorf("answer %q, want none", *res.Answer)
			case tc.want != nil && (res.Answer == nil || *res.Answer != *tc.want):
				t.Errorf("answer %v, want %q (stdout %q)", res.Answer, *tc.want, res.Stdout)
			}
			if strings.Contains(tc.script, "echo \"SUBMIT: 42\"") && !strings.Contains(res.Stdout, "SUBMIT: 42\n") {
				t.Errorf("the line must stay in the output: %q", res.Stdout)
			}
		})
	}
}

func ptr(s string) *string { return &s }
