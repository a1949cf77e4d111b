package bridge

import (
	"os"
	"path/filepath"
	"testing"
)

// Each persistent sandbox gets its own sessions root under the private
// per-user parent (issue: sandboxes sharing one root saw each other).
func TestDefaultSessionsRoot(t *testing.T) {
	a, err := SandboxSessionsRoot("a")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SandboxSessionsRoot("b")
	if a == b || filepath.Dir(a) != DefaultParent() || filepath.Base(a) != "sandbox-a" {
		t.Errorf("roots %s and %s", a, b)
	}
	if st, err := os.Stat(filepath.Dir(a)); err != nil || st.Mode().Perm() != 0o711 {
		t.Errorf("parent: %v %v", st.Mode(), err)
	}
}

func TestPrepareSessionsRoot(t *testing.T) {
	base := t.TempDir()
	root, _, err := PrepareSessionsRoot(filepath.Join(base, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(root)
	if err != nil || st.Mode().Perm() != 0o711 {
		t.Fatalf("root not 0711: %v %v", st.Mode(), err)
	}
	// An existing private dir is made traversable (not listable) for the container user.
	priv := filepath.Join(base, "priv")
	os.Mkdir(priv, 0o700)
	if _, _, err := PrepareSessionsRoot(priv); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(priv); st.Mode().Perm() != 0o711 {
		t.Errorf("mode %v", st.Mode())
	}
	// A file or a symlink is refused.
	f := filepath.Join(base, "file")
	os.WriteFile(f, nil, 0o644)
	if _, _, err := PrepareSessionsRoot(f); err == nil {
		t.Error("file accepted")
	}
	l := filepath.Join(base, "link")
	os.Symlink(priv, l)
	if _, _, err := PrepareSessionsRoot(l); err == nil {
		t.Error("symlink accepted")
	}
}
