//go:build linux

package gates

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteFileSwapRace performs the attack of issue 26 item 1 without
// racing: a sandbox with a writable workspace exchanges sub/ with a
// symlink sub -> .git (renameat2 RENAME_EXCHANGE) while write_file
// sub/config runs. Before, the protected-path check and the symlink check
// looked at the path string and the write went through os.Root, which
// resolved the string again and followed the in-root link: the content
// landed in .git/config, whose core.fsmonitor the owner's next git status
// runs. The hook runs the exchange after the check; wherever the swap
// falls, the write must be refused or land in the real directory (now
// named lnk), never in .git.
func TestWriteFileSwapRace(t *testing.T) {
	const evil = "[core]\n\tfsmonitor = touch /tmp/pwned\n"
	for _, tc := range []struct {
		name string
		path string // what write_file is asked to write
		when string // the checked path after which the exchange happens
		want string // where the content may land instead (under the real sub/, renamed lnk)
	}{
		// After every check, just before the file is created and renamed.
		{name: "after the check", path: "sub/config", when: "sub/config", want: "lnk/config"},
		// After "sub" was checked, before the walk opened it.
		{name: "mid walk", path: "sub/config", when: "sub", want: ""},
		// A directory still to be made below the swapped one.
		{name: "new subdir", path: "sub/hooks/pre-commit", when: "sub/hooks/pre-commit", want: "lnk/hooks/pre-commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n")
			must(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
			must(t, os.Symlink(".git", filepath.Join(ws, "lnk")))
			_, gs := fixture(t, Options{WritableRoot: ws, ProtectedPaths: []string{".git"}})
			swapped := false
			testHookAfterCheck = func(rel string) {
				if rel != tc.when || swapped {
					return
				}
				err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "sub"), unix.AT_FDCWD, filepath.Join(ws, "lnk"), unix.RENAME_EXCHANGE)
				if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
					t.Skipf("renameat2(RENAME_EXCHANGE) unsupported here: %v", err)
				}
				must(t, err)
				swapped = true
			}
			defer func() { testHookAfterCheck = nil }()
			r := callGate(t, gs["write_file"], []byte(evil), tc.path)
			if !swapped {
				t.Fatalf("the hook never saw %q: the test did not attack", tc.when)
			}
			if fi, err := os.Lstat(filepath.Join(ws, "sub")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("sub is not the symlink after the exchange: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
				t.Errorf("the write landed in .git/config: %q", b)
			}
			ents, _ := os.ReadDir(filepath.Join(ws, ".git"))
			if len(ents) != 1 {
				t.Errorf(".git holds %d entries, want only config: %v", len(ents), ents)
			}
			switch {
			case r.code == ExitDenied:
				t.Logf("refused: %v", r.err)
			case r.code == 0 && tc.want != "":
				if b, err := os.ReadFile(filepath.Join(ws, tc.want)); err != nil || string(b) != evil {
					t.Errorf("exit 0, but %s is %q (%v)", tc.want, b, err)
				}
			default:
				t.Errorf("exit %d (%v): want refused (126) or written into the real directory", r.code, r.err)
			}
		})
	}
}
