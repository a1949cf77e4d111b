package trust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/control"
	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/internal/config"
)

// A sandbox opened on a workspace that holds the server's token file or
// TLS key (in it, or below it, or reached through a link) is refused: the
// sandboxed command could read the token and connect as a client. Other
// workspaces open as before, and a check set before still runs.
func TestGuardSecretsRefusesWorkspace(t *testing.T) {
	root := t.TempDir()
	secrets := filepath.Join(root, "home", "secrets")
	other := filepath.Join(root, "work")
	for _, d := range []string{secrets, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secrets, "token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The token is named through a link to its directory: the check
	// compares resolved paths.
	if err := os.Symlink(secrets, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	var asked []string
	opts := rpc.Options{Options: control.Options{CheckWorkspace: func(ws string, _ bool) error {
		asked = append(asked, ws)
		return nil
	}}}
	err := Guard(&opts, nil, []SecretFile{
		{"--token-file", filepath.Join(root, "link", "token")},
		{"--tls-key", ""}, // no TLS
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{secrets, filepath.Join(root, "home"), root} {
		err := opts.CheckWorkspace(ws, false)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != rpc.CodeInvalidParams || re.Message != "refusing workspace "+ws+": it holds "+filepath.Join(secrets, "token")+" (--token-file), which the sandboxed command could read" {
			t.Errorf("workspace %s: %v", ws, err)
		} else if d, _ := re.Data.(map[string]string); d["hint"] == "" {
			t.Errorf("workspace %s: no hint: %+v", ws, re)
		}
	}
	for _, ws := range []string{other, filepath.Join(secrets, "sub"), secrets + "2"} {
		if err := opts.CheckWorkspace(ws, false); err != nil {
			t.Errorf("workspace %s: %v", ws, err)
		}
	}
	if len(asked) != 3 {
		t.Fatalf("the check set before was asked about %v, want the 3 workspaces that passed", asked)
	}

	// A directory every sandbox can read (a gate root) is refused at once.
	err = Guard(&rpc.Options{}, []Reachable{{"gates.root", other}, {"gates.writable_root", filepath.Join(root, "home")}},
		[]SecretFile{{"--tls-key", filepath.Join(secrets, "key.pem")}})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "gates.writable_root" || !strings.Contains(ce.Msg, "(--tls-key), which the sandbox could read") {
		t.Fatalf("%v", err)
	}
}

// fileHint: the file's own hint, else the caller's.
func TestFileHint(t *testing.T) {
	if h := fileHint(&FileError{"m", ""}, "def"); h != "def" {
		t.Errorf("fileHint without one = %q", h)
	}
	if h := fileHint(fmt.Errorf("w: %w", &FileError{"m", "own"}), "def"); h != "own" {
		t.Errorf("fileHint = %q", h)
	}
}
