//go:build unix

package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "gatebridge", FileName))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreAddListRemove(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	if l, err := s.List(now); err != nil || len(l) != 0 {
		t.Fatalf("missing file: %v, %v", l, err)
	}
	g, err := s.Add(Grant{Gate: "git_log", Exact: []string{"-n", "\xff"}, Lifetime: LifeAlways}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.ID, "g-") {
		t.Errorf("id %q", g.ID)
	}
	for path, want := range map[string]os.FileMode{s.Path(): 0o600, filepath.Dir(s.Path()): 0o700} {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", path, fi.Mode().Perm(), want, err)
		}
	}
	// another process's view (a new Store) reads the exact bytes back
	other, _ := NewStore(s.Path())
	l, err := other.List(now)
	if err != nil || len(l) != 1 || l[0].Exact[1] != "\xff" || !l[0].Matches("git_log", []string{"-n", "\xff"}, "", "", now) {
		t.Fatalf("List = %+v, %v", l, err)
	}
	if err := s.Remove(g.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(g.ID); err == nil {
		t.Error("removed twice")
	}
	if l, err := other.List(now); err != nil || len(l) != 0 {
		t.Fatalf("after rm, the other store still lists %+v (%v)", l, err)
	}
}

// Attack: a grants file that is a link, or that others could write or
// read, is refused, not read.
func TestStoreRefusesUntrustedFile(t *testing.T) {
	s := newStore(t)
	if _, err := s.Add(Grant{Gate: "g", AnyArgs: true, Lifetime: LifeAlways}, time.Now()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.Path())

	if err := os.Chmod(s.Path(), 0o620); err != nil {
		t.Fatal(err)
	}
	fresh, _ := NewStore(s.Path())
	if _, err := fresh.List(time.Now()); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("group-writable file: %v", err)
	}

	planted := filepath.Join(t.TempDir(), "planted.yaml")
	os.WriteFile(planted, data, 0o600)
	os.Remove(s.Path())
	if err := os.Symlink(planted, s.Path()); err != nil {
		t.Fatal(err)
	}
	fresh, _ = NewStore(s.Path())
	if _, err := fresh.List(time.Now()); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("link: %v", err)
	}
}

// Attack: a grants file inside the workspace is refused (the sandbox
// could write it there).
func TestStoreInsideWorkspace(t *testing.T) {
	ws := t.TempDir()
	s, _ := NewStore(filepath.Join(ws, ".config", "gatebridge", FileName))
	if err := s.Inside(ws); err == nil {
		t.Error("a grants file in the workspace was accepted")
	}
	if err := s.Inside(filepath.Join(ws, "..", "elsewhere")); err != nil {
		t.Error(err)
	}
}

func TestDefaultPathIgnoresCwd(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Chdir(t.TempDir())
	os.WriteFile(FileName, []byte("grants: [{id: g-1, gate: x, any_args: true, lifetime: always}]\n"), 0o600)
	p, err := DefaultPath()
	if err != nil || p != filepath.Join(cfg, "gatebridge", FileName) {
		t.Fatalf("DefaultPath = %q, %v", p, err)
	}
	s, _ := NewStore(p)
	if l, err := s.List(time.Now()); err != nil || len(l) != 0 {
		t.Errorf("a grants.yaml in the cwd was read: %+v, %v", l, err)
	}
}

// A grant too large for the file (arguments the sandbox chose, kept
// "always, exactly these") is not written: the file would be refused at
// every later read, denying every call that needs approval in every
// process of the user, and `grants rm` could not repair it.
func TestStoreAddOverCap(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	if _, err := s.Add(Grant{Gate: "g", Exact: []string{"small"}, Lifetime: LifeAlways}, now); err != nil {
		t.Fatal(err)
	}
	_, err := s.Add(Grant{Gate: "g", Exact: []string{strings.Repeat("a", maxFileBytes)}, Lifetime: LifeAlways}, now)
	if err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("a grant past the file's cap was kept: %v", err)
	}
	if l, err := s.List(now); err != nil || len(l) != 1 {
		t.Fatalf("the grants file after the refused grant: %d grants, %v", len(l), err)
	}
}

// Attack: a grants file whose path goes through a link into the
// workspace (~/.config a link to a dotfiles checkout the sandbox works
// in) is inside it too: the sandbox, running as the workspace's owner,
// could write a 0600 grants.yaml there that the store would trust.
func TestStoreInsideWorkspaceThroughLink(t *testing.T) {
	top := t.TempDir()
	ws := filepath.Join(top, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "dot"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "dot"), filepath.Join(top, "config")); err != nil {
		t.Fatal(err)
	}
	s, _ := NewStore(filepath.Join(top, "config", "gatebridge", FileName)) // gatebridge/ need not exist yet
	if err := s.Inside(ws); err == nil {
		t.Error("a grants file reached through a link into the workspace was accepted")
	}
	// The workspace named through a link is the same workspace.
	if err := os.Symlink(ws, filepath.Join(top, "wslink")); err != nil {
		t.Fatal(err)
	}
	s2, _ := NewStore(filepath.Join(ws, "g", FileName))
	if err := s2.Inside(filepath.Join(top, "wslink")); err == nil {
		t.Error("a workspace named through a link was not matched")
	}
	if err := s.Inside(filepath.Join(top, "elsewhere")); err != nil {
		t.Error(err)
	}
}
