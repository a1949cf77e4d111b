package sandbox_test

import (
	"slices"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

func TestMergeEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		base []string
		over [][]string
		want []string
	}{
		{"empty", nil, nil, nil},
		{"base only", []string{"A=1", "B=2"}, nil, []string{"A=1", "B=2"}},
		{"replace in place", []string{"A=1", "B=2", "C=3"}, [][]string{{"B=x"}}, []string{"A=1", "B=x", "C=3"}},
		{"later list wins", []string{"A=1"}, [][]string{{"A=2", "B=1"}, {"A=3"}}, []string{"A=3", "B=1"}},
		{"duplicate in base", []string{"A=1", "A=2"}, nil, []string{"A=2"}},
		{"empty value", []string{"A=1"}, [][]string{{"A="}}, []string{"A="}},
		{"value with =", nil, [][]string{{"A=b=c"}}, []string{"A=b=c"}},
		{"no =", []string{"A"}, [][]string{{"A=1"}}, []string{"A=1"}},
		{"keys are case sensitive", []string{"path=a"}, [][]string{{"PATH=b"}}, []string{"path=a", "PATH=b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := slices.Clone(tc.base)
			got := sandbox.MergeEnv(base, tc.over...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("MergeEnv = %q, want %q", got, tc.want)
			}
			if !slices.Equal(base, tc.base) {
				t.Errorf("base modified: %q", base)
			}
		})
	}
}

func TestSessionEnv(t *testing.T) {
	s := sandbox.SessionDirs{Root: "/s", Bin: "/s/bin", Calls: "/s/calls", Responses: "/s/responses", Tmp: "/s/tmp"}
	got := sandbox.SessionEnv(s, "/usr/bin:/bin")
	want := []string{"PATH=/s/bin:/usr/bin:/bin", "TMPDIR=/s/tmp", "GATEBRIDGE_CALLS_DIR=/s/calls",
		"GATEBRIDGE_RESPONSES_DIR=/s/responses", "GATEBRIDGE_SESSION_DIR=/s"}
	if !slices.Equal(got, want) {
		t.Errorf("SessionEnv = %q", got)
	}
	// No empty PATH element (it would search the cwd), no empty entries.
	if got := sandbox.SessionEnv(sandbox.SessionDirs{}, "/bin"); !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Errorf("SessionEnv(empty) = %q", got)
	}
	if got := sandbox.SessionEnv(sandbox.SessionDirs{Bin: "/b"}, ""); !slices.Equal(got, []string{"PATH=/b"}) {
		t.Errorf("SessionEnv(bin only) = %q", got)
	}
}
