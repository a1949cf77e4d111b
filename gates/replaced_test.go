//go:build unix

package gates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkspaceReplaced performs the attack of a local user who controls
// the workspace's path: root runs gatebridge on /home/alice/proj (a
// supported setup: the command then runs as alice), and alice, who owns
// /home/alice, exchanges proj for a symlink to /etc while the gates run.
// The gates opened the root by its path at every call, so root's
// read_file printed /etc/shadow and root's write_file wrote into /etc
// (by hand, with bwrap: the second read_file call). The gates must keep
// to the directory they were started on, however the path changes: a
// link or another directory put in its place is refused, and the content
// it holds neither read nor written.
func TestWorkspaceReplaced(t *testing.T) {
	for _, how := range []string{"symlink", "directory"} {
		t.Run(how, func(t *testing.T) {
			parent := t.TempDir()
			ws := filepath.Join(parent, "proj")
			etc := filepath.Join(parent, "etc")
			writeFile(t, filepath.Join(ws, "README"), "hello\n")
			writeFile(t, filepath.Join(etc, "shadow"), "root:SECRET:0:0\n")
			gs, err := Builtins(Options{Root: ws, WritableRoot: ws})
			must(t, err)
			g := map[string]Gate{}
			for _, x := range gs {
				g[x.Spec().Name] = x
			}
			// Before the swap, the gates work.
			callGate(t, g["read_file"], nil, "README").check(t, ExitOK, "hello\n", "")

			must(t, os.Rename(ws, ws+".real"))
			if how == "symlink" {
				must(t, os.Symlink(etc, ws))
			} else {
				must(t, os.Rename(etc, ws))
				etc = ws
			}
			for _, c := range []struct {
				gate  string
				args  []string
				stdin []byte
			}{
				{"read_file", []string{"shadow"}, nil},
				{"read_file", []string{filepath.Join(ws, "shadow")}, nil},
				{"list_dir", nil, nil},
				{"search", []string{"SECRET"}, nil},
				{"write_file", []string{"cron-job"}, []byte("* * * * * root sh -c pwned\n")},
				{"write_file", []string{"new/dir/file"}, []byte("pwned\n")},
			} {
				r := callGate(t, g[c.gate], c.stdin, c.args...)
				if strings.Contains(r.out, "SECRET") || strings.Contains(r.out, "shadow") {
					t.Errorf("%s %q after the workspace was replaced: printed %q", c.gate, c.args, r.out)
				}
				if r.code != ExitDenied || !strings.Contains(r.errText(), "was replaced") {
					t.Errorf("%s %q after the workspace was replaced: exit %d, %q; want %d, the workspace was replaced", c.gate, c.args, r.code, r.errText(), ExitDenied)
				}
			}
			for _, p := range []string{"cron-job", "new"} {
				if _, err := os.Lstat(filepath.Join(etc, p)); err == nil {
					t.Errorf("write_file wrote %s into what replaced the workspace", p)
				}
			}

			// Put back, the workspace is the gates' again.
			must(t, os.Rename(ws, filepath.Join(parent, "gone")))
			must(t, os.Rename(ws+".real", ws))
			callGate(t, g["read_file"], nil, "README").check(t, ExitOK, "hello\n", "")
			callGate(t, g["write_file"], []byte("x\n"), "sub/f").check(t, ExitOK, "", "")
		})
	}
}
