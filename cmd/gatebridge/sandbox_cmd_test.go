package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSandboxArgs(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	// No engine is needed: arguments are checked first.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sandbox"}, "missing subcommand"},
		{[]string{"sandbox", "start"}, "want exactly one NAME"},
		{[]string{"sandbox", "start", "a", "b"}, "want exactly one NAME"},
		{[]string{"sandbox", "start", "bad name"}, "invalid name"},
		{[]string{"sandbox", "start", "-x"}, "unknown shorthand flag"},
		{[]string{"sandbox", "start", "../x"}, "invalid name"},
		{[]string{"sandbox", "stop"}, "want exactly one NAME"},
		{[]string{"sandbox", "stop", "a/b"}, "invalid name"},
		{[]string{"sandbox", "exec"}, "no sandbox name"},
		{[]string{"sandbox", "exec", "t1"}, "no command given"},
		{[]string{"sandbox", "exec", "t1", "--"}, "no command given"},
		{[]string{"sandbox", "exec", ".t1", "--", "true"}, "invalid name"},
		{[]string{"sandbox", "exec", "t1", "extra", "--", "true"}, `unexpected "extra"`},
		{[]string{"sandbox", "exec", "t1", "true"}, "missing --"},
		{[]string{"sandbox", "exec", "--", "true"}, "no sandbox name"},
		{[]string{"sandbox", "ls", "x"}, "unknown command"},
		{[]string{"sandbox", "prune", "x"}, "unknown command"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, nil, &out, &errb)
		if code != ExitInternal || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 125 and %q", tc.args, code, errb.String(), tc.want)
		}
		if strings.Contains(errb.String(), "nonexistent") {
			t.Errorf("%v: contacted the engine before checking arguments: %s", tc.args, errb.String())
		}
	}
}

func TestSandboxNoEngineHint(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	for _, args := range [][]string{
		{"sandbox", "start", "--sessions-root", t.TempDir(), "t1"},
		{"sandbox", "stop", "t1"},
		{"sandbox", "ls"},
		{"sandbox", "prune"},
		{"sandbox", "exec", "t1", "--", "true"},
	} {
		var out, errb bytes.Buffer
		code := run(args, nil, &out, &errb)
		if code != ExitInternal || !strings.Contains(errb.String(), "DOCKER_HOST") || !strings.Contains(errb.String(), "hint:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestPrintSandboxes(t *testing.T) {
	var buf bytes.Buffer
	list := []sandboxInfo{{Name: "t1", ID: "0123456789abcdef", Image: "img", Status: "Up 1 second", SessionsRoot: "/r"}}
	if err := printSandboxes(&buf, list, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "t1") || !strings.Contains(buf.String(), "0123456789ab ") || strings.Contains(buf.String(), "cdef") {
		t.Errorf("%s", buf.String())
	}
}
