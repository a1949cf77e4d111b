package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gates --format openai|anthropic|mcp|json-schema: every gate as a tool
// definition with a JSON Schema of its parameters, in each API's shape.
func TestGatesToolSchemas(t *testing.T) {
	t.Chdir(t.TempDir())
	for format, keys := range map[string][]string{
		"openai":      {"type", "function"},
		"anthropic":   {"name", "description", "input_schema"},
		"mcp":         {"name", "description", "inputSchema"},
		"json-schema": {"name", "description", "schema"},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"gates", "--format", format}, nil, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errb.String())
		}
		var tools []map[string]any
		if err := json.Unmarshal(out.Bytes(), &tools); err != nil || len(tools) < 4 {
			t.Fatalf("%s: %v: %s", format, err, out.String())
		}
		for _, tool := range tools {
			for _, k := range keys {
				if _, ok := tool[k]; !ok {
					t.Fatalf("%s: tool without %q: %v", format, k, tool)
				}
			}
		}
		var readFile map[string]any
		for _, tool := range tools {
			if fn, ok := tool["function"].(map[string]any); ok {
				tool = fn
			}
			if tool["name"] == "read_file" {
				readFile = tool
			}
		}
		schema, _ := json.Marshal(readFile)
		// The property names are the keys read_file takes as one JSON
		// object argument (gates.ParamArgs), typed.
		if !strings.Contains(string(schema), `"path":{`) || !strings.Contains(string(schema), `"required":["path"]`) ||
			!strings.Contains(string(schema), `"offset":{"description":"Start at line N, counted from 1`) || !strings.Contains(string(schema), `"type":"integer"`) {
			t.Fatalf("%s: read_file: %s", format, schema)
		}
	}
}

// prompt prints the bash tool's text for the configured sandbox.
func TestPrompt(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	if code := run([]string{"prompt", "--sandbox", "local", "--writable-workspace"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"(local backend)", "(writable)", "shell state", "- read_file [--offset N] [--limit N] PATH: ", "- submit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("prompt lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "bash_output") {
		t.Errorf("prompt mentions the MCP background tools:\n%s", out.String())
	}
}

// The command limits, when set, are in the capability text, each naming
// its key; at their defaults they are not.
func TestPromptCommandLimits(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg := filepath.Join(t.TempDir(), "c.yaml") // outside the workspace
	if err := os.WriteFile(cfg, []byte("sandbox:\n  max_command_bytes: 4096\n  max_commands: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--config", cfg, "prompt", "--sandbox", "local"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	head, _, _ := strings.Cut(out.String(), "\n\n")
	for _, want := range []string{"at most 4096 bytes (sandbox.max_command_bytes)", "at most 50 commands (sandbox.max_commands)"} {
		if !strings.Contains(head, want) {
			t.Errorf("prompt's first paragraph lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"prompt", "--sandbox", "local"}, nil, &out, &errb); code != 0 || strings.Contains(out.String(), "sandbox.max_command") {
		t.Errorf("exit %d; with the defaults, the prompt names a command limit:\n%s", code, out.String())
	}
}
