package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// isolate is always a map, its keys are checked like any others, and the
// paths it gives are checked when the gates are made: each error names
// the key, with a hint. Writing a protected path of the workspace
// (.git, or the workspace that holds it) is refused: the gate could plant
// hooks the host's next git runs.
func TestIsolateConfigErrors(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	os.Mkdir(filepath.Join(ws, "src"), 0o755)
	gate := "gates:\n  commands:\n    - name: x\n      command: [\"true\"]\n      isolate: "
	server := "mcp:\n  servers:\n    s:\n      command: [\"true\"]\n      isolate: "
	for _, tc := range []struct{ yaml, want string }{
		{gate + "true\n", "gates.commands[0].isolate"},
		{server + "yes\n", "mcp.servers.s.isolate"},
		{gate + "{reed: [/usr]}\n", "reed"},
		{gate + "{write: [" + ws + "]}\n", "gates.commands[0].isolate.write"},
		{gate + "{write: [" + filepath.Join(ws, ".git") + "]}\n", "gates.commands[0].isolate.write"},
		{server + "{write: [" + ws + "]}\n", "mcp.servers.s.isolate.write"},
		{gate + "{host: true, read: [/usr]}\n", "gates.commands[0].isolate.host"},
		{gate + "{read: [usr]}\n", "gates.commands[0].isolate.read"},
		{"mcp:\n  servers:\n    s:\n      url: http://127.0.0.1:1/\n      isolate: {host: true}\n", "mcp.servers.s.isolate"},
	} {
		p := filepath.Join(t.TempDir(), "gatebridge.yaml")
		os.WriteFile(p, []byte(tc.yaml), 0o644)
		cfg, _, err := loadConfig(p, nil, newBackends())
		if err == nil {
			var reg interface{ Close() error }
			reg, _, err = buildRegistry(context.Background(), newKinds(), cfg, ws, ws, nil)
			if err == nil {
				reg.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || hint.Of(err) == "" {
			t.Errorf("%q: %v (hint %q), want an error naming %s with a hint", tc.yaml, err, hint.Of(err), tc.want)
		}
	}
	// A write path beside the protected one is fine.
	p := filepath.Join(t.TempDir(), "gatebridge.yaml")
	os.WriteFile(p, []byte(gate+"{host: false, read: ["+ws+"], write: ["+filepath.Join(ws, "src")+"]}\n"), 0o644)
	cfg, _, err := loadConfig(p, nil, newBackends())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gates.Commands[0].Isolate.Write[0] != filepath.Join(ws, "src") {
		t.Errorf("decoded %+v", cfg.Gates.Commands[0].Isolate)
	}
}
