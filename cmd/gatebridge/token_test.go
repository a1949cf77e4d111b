package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/gates"
)

// A sandbox opened on a workspace that holds the server's token file or
// TLS key (in it, or below it, or reached through a link) is refused
// before its gates exist: the sandboxed command could read the token and
// connect as a client. Other workspaces open as before.
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
	opened := 0
	opts := rpc.Options{Gates: func(string, string, bool) (*gates.Registry, map[string]string, error) {
		opened++
		return gates.NewRegistry(), nil, nil
	}}
	err := guardSecrets(&opts, nil, []secretFile{
		{"--token-file", filepath.Join(root, "link", "token")},
		{"--tls-key", ""}, // no TLS
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{secrets, filepath.Join(root, "home"), root} {
		_, _, err := opts.Gates(ws, ws, false)
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "refusing workspace "+ws+": it holds "+filepath.Join(secrets, "token")+" (--token-file)") || ce.Hint == "" {
			t.Errorf("workspace %s: %v", ws, err)
		}
	}
	if opened != 0 {
		t.Fatalf("gates made for %d refused workspaces", opened)
	}
	for _, ws := range []string{other, filepath.Join(secrets, "sub"), secrets + "2"} {
		if _, _, err := opts.Gates(ws, ws, false); err != nil {
			t.Errorf("workspace %s: %v", ws, err)
		}
	}
	if opened != 3 {
		t.Fatalf("gates made for %d workspaces, want 3", opened)
	}

	// A directory every sandbox can read (a gate root) is refused at once.
	err = guardSecrets(&rpc.Options{}, []reachable{{"gates.root", other}, {"gates.writable_root", filepath.Join(root, "home")}},
		[]secretFile{{"--tls-key", filepath.Join(secrets, "key.pem")}})
	var ce *configError
	if !errors.As(err, &ce) || ce.Key != "gates.writable_root" || !strings.Contains(ce.Msg, "(--tls-key), which the sandbox could read") {
		t.Fatalf("%v", err)
	}
}
