package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// TestSessionCreationFollowsNoPlantedLink performs what a persistent
// sandbox can do to the sessions root its container may write (gatebridge
// not root: the container runs as its uid) while the host makes a session
// there: as each directory of the session is made, it swaps it for a link
// to a host directory, or it plants a link where a directory is still to
// be made. The host never goes through the link: the host directory keeps
// its mode and gets no entry (before, the session's chmods and mkdirs
// went by path: the directory got mode 0700 and bin/, calls/, responses/
// and tmp/, and the wrappers were written there).
func TestSessionCreationFollowsNoPlantedLink(t *testing.T) {
	for _, tc := range []struct {
		name, at string // at: the directory swapped ("": the session's root)
		plant    bool   // plant a link at `at` once the root is made, instead
	}{
		{"root swapped", "", false},
		{"bin swapped", mailbox.DirBin, false},
		{"calls swapped", mailbox.DirCalls, false},
		{"tmp swapped", mailbox.DirTmp, false},
		{"responses planted", mailbox.DirResponses, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			victim := t.TempDir()
			mustOK(t, os.Chmod(victim, 0o755))
			mustOK(t, os.WriteFile(filepath.Join(victim, "keep"), []byte("keep"), 0o644))
			name := mailbox.SessionPrefix + strings.Repeat("a", 32)
			root := filepath.Join(parent, name)
			at := filepath.Join(root, tc.at)
			swapped := false
			testHookSessionName = func(string) string { return name }
			testHookSessionDirMade = func(path string) {
				switch {
				case tc.plant && path == root:
					mustOK(t, os.Symlink(victim, at))
					swapped = true
				case !tc.plant && path == at:
					mustOK(t, os.Rename(path, path+"-moved"))
					mustOK(t, os.Symlink(victim, path))
					swapped = true
				}
			}
			defer func() { testHookSessionName, testHookSessionDirMade = nil, nil }()
			s, err := Open(Config{Gates: testRegistry(t), Dir: parent})
			if err == nil {
				if cerr := s.Close(); cerr != nil {
					t.Errorf("close: %v", cerr)
				}
			}
			if !swapped {
				t.Fatalf("the hook never swapped %s (the test proves nothing): open: %v", at, err)
			}
			t.Logf("open: %v", err)
			fi, serr := os.Stat(victim)
			mustOK(t, serr)
			ents, _ := os.ReadDir(victim)
			if fi.Mode().Perm() != 0o755 || len(ents) != 1 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("the host directory the link named: mode %v, entries %v (want 0755, [keep])", fi.Mode().Perm(), names)
			}
		})
	}
}
