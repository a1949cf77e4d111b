package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type gateDesc struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	Usage   string `json:"usage"`
	Params  []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Required    bool   `json:"required"`
	} `json:"params"`
	Stdin string `json:"stdin"`
}

// TestGatesCommand checks `gates` in both formats, with command gates from
// a config, and a bad format.
func TestGatesCommand(t *testing.T) {
	dir := workspace(t)
	cfg := filepath.Join(t.TempDir(), "gates.yaml") // not in dir: ./gatebridge.yaml is read by default
	if err := os.WriteFile(cfg, []byte(exitGatesConfig+"    - name: git_log\n      summary: Show the history.\n      command: [git, log]\n      allow_args: [--oneline]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	builtins := []string{"gb_echo", "list_dir", "read_file", "search", "submit"}

	out := gbRaw(t, dir, nil, nil, 0, "gates", "--format", "json")
	if out.Code != 0 || out.Stderr != "" {
		t.Fatalf("exit %d, stderr %q", out.Code, out.Stderr)
	}
	var list []gateDesc
	if err := json.Unmarshal([]byte(out.Stdout), &list); err != nil {
		t.Fatalf("not a JSON list of gates: %v: %s", err, out.Stdout)
	}
	var names []string
	for _, g := range list {
		names = append(names, g.Name)
		if g.Summary == "" || !strings.HasPrefix(g.Usage, g.Name) || g.Params == nil {
			t.Errorf("gate %+v: want a summary, usage starting with the name, and params", g)
		}
		for _, p := range g.Params {
			if p.Name == "" || p.Description == "" {
				t.Errorf("gate %s: param %+v", g.Name, p)
			}
		}
	}
	if strings.Join(names, " ") != strings.Join(builtins, " ") {
		t.Errorf("gates %v, want %v", names, builtins)
	}

	out = gbRaw(t, dir, nil, nil, 0, "gates", "--format", "text")
	text := out.Stdout
	if out.Code != 0 || len(strings.Split(strings.TrimSpace(text), "\n")) != len(builtins) {
		t.Errorf("exit %d, text:\n%s", out.Code, text)
	}
	for _, g := range list {
		if !strings.Contains(text, g.Usage) || !strings.Contains(text, g.Summary) {
			t.Errorf("text output lacks %s's usage or summary:\n%s", g.Name, text)
		}
	}
	if def := gbRaw(t, dir, nil, nil, 0, "gates"); def.Stdout != text {
		t.Errorf("default format is not text: %q", def.Stdout)
	}

	out = gbRaw(t, dir, nil, nil, 0, "--config", cfg, "gates", "--format", "json")
	list = nil
	if err := json.Unmarshal([]byte(out.Stdout), &list); err != nil {
		t.Fatalf("%v: %s", err, out.Stdout)
	}
	byName := map[string]gateDesc{}
	for _, g := range list {
		byName[g.Name] = g
	}
	for _, n := range []string{"fail42", "slow", "git_log"} {
		if _, ok := byName[n]; !ok {
			t.Errorf("command gate %s missing from %s", n, out.Stdout)
		}
	}
	if g := byName["git_log"]; g.Summary != "Show the history." {
		t.Errorf("git_log: %+v", g)
	}
	out = gbRaw(t, dir, nil, nil, 0, "--config", cfg, "gates")
	if !strings.Contains(out.Stdout, "git_log") || !strings.Contains(out.Stdout, "Show the history.") {
		t.Errorf("text output lacks the command gate:\n%s", out.Stdout)
	}

	out = gbRaw(t, dir, []string{"GATEBRIDGE_GATES_WRITABLE_ROOT=" + dir}, nil, 0, "gates")
	if !strings.Contains(out.Stdout, "write_file") {
		t.Errorf("write_file missing with a writable root:\n%s", out.Stdout)
	}

	out = gbRaw(t, dir, nil, nil, 0, "gates", "--format", "xml")
	want := "gatebridge: gates: unknown format \"xml\"\ngatebridge: hint: use --format text, json, json-schema, openai, anthropic or mcp\n"
	if out.Code != 125 || out.Stdout != "" || out.Stderr != want {
		t.Errorf("--format xml: exit %d, stdout %q, stderr %q; want 125 and %q", out.Code, out.Stdout, out.Stderr, want)
	}
}
