package main

import (
	"bytes"
	"encoding/json"
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
