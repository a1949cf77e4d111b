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
	// Without Spec.SessionEnv: PATH and TMPDIR alone (sandbox knows no
	// mailbox names).
	got := sandbox.SessionEnv(&sandbox.Spec{}, s, "/usr/bin:/bin")
	if want := []string{"PATH=/s/bin:/usr/bin:/bin", "TMPDIR=/s/tmp"}; !slices.Equal(got, want) {
		t.Errorf("SessionEnv = %q, want %q", got, want)
	}
	// With it, its entries, for the paths and PATH the backend gives.
	spec := &sandbox.Spec{SessionEnv: func(in sandbox.SessionDirs, base string) []string {
		return []string{"IN=" + in.Calls, "BASE=" + base}
	}}
	if got, want := sandbox.SessionEnv(spec, s, "/bin"), []string{"IN=/s/calls", "BASE=/bin"}; !slices.Equal(got, want) {
		t.Errorf("SessionEnv with Spec.SessionEnv = %q, want %q", got, want)
	}
	// No empty PATH element (it would search the cwd), no empty entries.
	if got := sandbox.PathEnv(sandbox.SessionDirs{}, "/bin"); !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Errorf("PathEnv(empty) = %q", got)
	}
	if got := sandbox.PathEnv(sandbox.SessionDirs{Bin: "/b"}, ""); !slices.Equal(got, []string{"PATH=/b"}) {
		t.Errorf("PathEnv(bin only) = %q", got)
	}
}

// Rebase moves a session's layout under another root (docker mounts it
// at /gatebridge/session): paths keep their place below the root, a path
// elsewhere keeps its base name, empty stays empty.
func TestSessionDirsRebase(t *testing.T) {
	s := sandbox.SessionDirs{Root: "/h/gb-1", Bin: "/h/gb-1/bin", Calls: "/h/gb-1/calls", Responses: "/h/gb-1/r/responses", Tmp: "/elsewhere/tmp"}
	want := sandbox.SessionDirs{Root: "/in", Bin: "/in/bin", Calls: "/in/calls", Responses: "/in/r/responses", Tmp: "/in/tmp"}
	if got := s.Rebase("/in"); got != want {
		t.Errorf("Rebase = %+v, want %+v", got, want)
	}
	if got := (sandbox.SessionDirs{}).Rebase("/in"); got != (sandbox.SessionDirs{}) {
		t.Errorf("Rebase of no session = %+v", got)
	}
	if got := (sandbox.SessionDirs{Root: "/h", Calls: "/h/calls"}).Rebase("/in"); got != (sandbox.SessionDirs{Root: "/in", Calls: "/in/calls"}) {
		t.Errorf("Rebase kept only what was set: %+v", got)
	}
}
