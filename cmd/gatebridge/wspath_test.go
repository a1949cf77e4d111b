package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The attack of a local user who controls the path to a workspace that a
// root gatebridge is given: alice (uid 4242) made /home/alice/proj a link
// to bob's home, and `gatebridge run --workspace /home/alice/proj`, as
// root, ran her command as bob (the workspace's owner) in bob's home: it
// appended to bob's .bashrc (by hand, with bwrap). The same with a
// directory writable by others on the way. As root, a workspace whose
// path a user other than root and its owner controls is refused; its
// owner's own links and directories are fine.
func TestWorkspacePathOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root gatebridge runs commands as the workspace's owner")
	}
	const aliceUID, bobUID = 4242, 4343
	top := t.TempDir()
	mkdir := func(p string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	symlink := func(target, p string, uid int) string {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	alice := mkdir(filepath.Join(top, "alice"), 0o755, aliceUID)
	bob := mkdir(filepath.Join(top, "bob"), 0o755, bobUID)
	rc := filepath.Join(bob, ".bashrc")
	if err := os.WriteFile(rc, []byte("# bob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := mkdir(filepath.Join(top, "open"), 0o777, 0)
	bobInOpen := mkdir(filepath.Join(open, "proj"), 0o755, bobUID)
	sticky := mkdir(filepath.Join(top, "sticky"), 0o777|os.ModeSticky, 0)
	aliceProj := mkdir(filepath.Join(alice, "work"), 0o755, aliceUID)
	bobInSticky := mkdir(filepath.Join(sticky, "bob"), 0o755, bobUID)

	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEBRIDGE_CONFIG", "")
	gb := func(ws string) (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"run", "--sandbox", "local", "--workspace", ws, "--", "sh", "-c", "echo pwned >> .bashrc"}, nil, &out, &errb)
		return code, errb.String()
	}
	for _, tc := range []struct {
		name, ws, why string
	}{
		{"alice's link to bob's home", symlink(bob, filepath.Join(alice, "proj"), aliceUID), "directory " + alice + " on the way is owned by uid 4242"},
		{"root's link in alice's directory", symlink(bob, filepath.Join(alice, "proj2"), 0), "owned by uid 4242"},
		{"a directory others may write", bobInOpen, "directory " + open + " on the way is writable by group or others"},
		{"root's link to alice's link", symlink(filepath.Join(alice, "proj"), filepath.Join(top, "rootlink"), 0), "owned by uid 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := gb(tc.ws)
			if code != 125 || !strings.Contains(stderr, "sandbox.workspace: refusing workspace") || !strings.Contains(stderr, tc.why) {
				t.Errorf("run --workspace %s: exit %d, %s; want 125 naming sandbox.workspace and %q", tc.ws, code, stderr, tc.why)
			}
			for _, f := range []string{rc, filepath.Join(bobInOpen, ".bashrc")} {
				if b, _ := os.ReadFile(f); strings.Contains(string(b), "pwned") {
					t.Fatalf("the command ran and wrote %s", f)
				}
			}
		})
	}
	// What only root and the owner control is fine: alice's own
	// directory (and her link to it), a sticky directory.
	for _, ws := range []string{aliceProj, symlink(aliceProj, filepath.Join(alice, "w"), aliceUID), bobInSticky} {
		if code, stderr := gb(ws); code != 0 {
			t.Errorf("run --workspace %s: exit %d, %s; want 0", ws, code, stderr)
		}
	}
}
