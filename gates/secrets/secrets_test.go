package secrets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// secretFile writes a 0600 file of ours.
func secretFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustNew(t *testing.T, srcs map[string]Source) *Store {
	t.Helper()
	s, err := New(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Bad config: each is an *Error naming the setting, with a hint.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   Source
		field string
	}{
		{"GH", Source{Env: "X"}, ""},
		{"9x", Source{Env: "X"}, ""},
		{"a-b", Source{Env: "X"}, ""},
		{"none", Source{}, ""},
		{"two", Source{Env: "X", File: "/x"}, ""},
		{"badenv", Source{Env: "A=B"}, "env"},
		{"path", Source{Env: "PATH"}, "env"},
		{"own", Source{Env: "GATEBRIDGE_CONFIG"}, "env"},
		{"rel", Source{File: "secrets/x"}, "file"},
		{"empty", Source{Command: []string{""}}, "command"},
		{"envrefresh", Source{Env: "X", Refresh: time.Hour}, "refresh"},
		{"neg", Source{File: "/x", Refresh: -time.Second}, "refresh"},
	} {
		_, err := New(map[string]Source{tc.name: tc.src}, Options{})
		var se *Error
		if !errors.As(err, &se) || se.Field != tc.field || se.Name != tc.name || hint.Of(err) == "" {
			t.Errorf("%s %+v: %v (%+v)", tc.name, tc.src, err, se)
		}
	}
}

// An env secret is captured when the Store is made, and ScrubEnv removes
// its variable from the process: no program gatebridge starts later
// inherits it.
func TestEnvCapturedAndScrubbed(t *testing.T) {
	t.Setenv("GB_TEST_SECRET_TOKEN", tok)
	s := mustNew(t, map[string]Source{"gh": {Env: "GB_TEST_SECRET_TOKEN"}, "unset": {Env: "GB_TEST_NOT_SET_X"}})
	s.ScrubEnv()
	if _, ok := os.LookupEnv("GB_TEST_SECRET_TOKEN"); ok {
		t.Fatal("ScrubEnv left the variable")
	}
	v, err := s.Get(context.Background(), "gh", nil)
	if err != nil || v != tok {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if got := s.Redactor().String("x" + tok); got != "x[secret:gh]" {
		t.Errorf("env value not redacted from the start: %q", got)
	}
	if _, err := s.Get(context.Background(), "unset", nil); err == nil || !strings.Contains(err.Error(), "not set") || hint.Of(err) == "" {
		t.Errorf("unset env: %v", err)
	}
	if _, err := s.Get(context.Background(), "nope", nil); !errors.Is(err, ErrUnknown) || !strings.Contains(hint.Of(err), "gh, unset") {
		t.Errorf("unknown: %v / %s", err, hint.Of(err))
	}
	if got := strings.Join(s.EnvNames(), ","); got != "GB_TEST_NOT_SET_X,GB_TEST_SECRET_TOKEN" {
		t.Errorf("EnvNames = %s", got)
	}
}

// File rules, each an attack: a file group or others can read, a link to
// the real file, a file with a second name, a file inside (or through a
// link into) a directory the sandbox writes, a value too short.
func TestFileRules(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	good := secretFile(t, dir, "good", "db-password-1\n\n")
	s := mustNew(t, map[string]Source{
		"good":   {File: good},
		"world":  {File: secretFile(t, dir, "world", "world-readable-1")},
		"group":  {File: secretFile(t, dir, "group", "group-readable-1")},
		"link":   {File: filepath.Join(dir, "link")},
		"hard":   {File: secretFile(t, dir, "hard", "hard-linked-value")},
		"inws":   {File: secretFile(t, ws, "inws", "planted-or-read-1")},
		"viaws":  {File: filepath.Join(dir, "wslink", "inws")},
		"short":  {File: secretFile(t, dir, "short", "short\n")},
		"absent": {File: filepath.Join(dir, "absent")},
	})
	os.Chmod(filepath.Join(dir, "world"), 0o604)
	os.Chmod(filepath.Join(dir, "group"), 0o640)
	os.Symlink(good, filepath.Join(dir, "link"))
	os.Link(filepath.Join(dir, "hard"), filepath.Join(ws, "hard-too"))
	os.Symlink(ws, filepath.Join(dir, "wslink"))
	ctx := context.Background()
	untrusted := []string{ws}

	v, err := s.Get(ctx, "good", untrusted)
	if err != nil || v != "db-password-1\n" { // one trailing newline goes
		t.Fatalf("good: %q, %v", v, err)
	}
	for name, want := range map[string]string{
		"world": "group or others", "group": "group or others", "link": "symbolic link",
		"hard": "hard links", "inws": "sandbox can write", "viaws": "sandbox can write",
		"short": "shorter than 8", "absent": "no such file",
	} {
		_, err := s.Get(ctx, name, untrusted)
		if err == nil || !strings.Contains(err.Error(), want) || hint.Of(err) == "" {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	if os.Geteuid() == 0 {
		p := secretFile(t, dir, "theirs", "someone-elses-1")
		os.Chown(p, 1234, 1234)
		st := mustNew(t, map[string]Source{"theirs": {File: p}})
		if _, err := st.Get(ctx, "theirs", nil); err == nil || !strings.Contains(err.Error(), "owned by uid 1234") {
			t.Errorf("another user's file: %v", err)
		}
	}
}

// A command source runs once (kept for the process), trimmed; with
// refresh it runs again once the value is older; a program where the
// sandbox writes is refused.
func TestCommandSource(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	script := secretFile(t, dir, "print.sh", "#!/bin/sh\necho run >> "+count+"\necho '  cmd-value-42  '\n")
	os.Chmod(script, 0o700)
	s := mustNew(t, map[string]Source{
		"once":  {Command: []string{script}},
		"fresh": {Command: []string{script}, Refresh: time.Nanosecond},
		// A failing command that prints the value, whole or in part, on
		// stderr or stdout: none of it is quoted in the error.
		"fails":   {Command: []string{"sh", "-c", "echo out-part-hunter2; echo token err-part-hunter2 expired >&2; exit 3"}},
		"planted": {Command: []string{script}},
	})
	ctx := context.Background()
	for range 3 {
		if v, err := s.Get(ctx, "once", nil); err != nil || v != "cmd-value-42" {
			t.Fatalf("once: %q, %v", v, err)
		}
	}
	runs := func() int { b, _ := os.ReadFile(count); return strings.Count(string(b), "run") }
	if runs() != 1 {
		t.Errorf("ran %d times, want once", runs())
	}
	s.Get(ctx, "fresh", nil)
	s.Get(ctx, "fresh", nil)
	if runs() != 3 {
		t.Errorf("with refresh: ran %d times, want 3", runs())
	}
	if _, err := s.Get(ctx, "fails", nil); err == nil || strings.Contains(err.Error(), "part-hunter2") ||
		!strings.Contains(err.Error(), "exit status 3") || hint.Of(err) == "" {
		t.Errorf("failing command: %v", err)
	}
	if _, err := s.Get(ctx, "planted", []string{dir}); err == nil || !strings.Contains(err.Error(), "sandbox can write") {
		t.Errorf("program in an untrusted dir: %v", err)
	}
	if s.Redactor().String("cmd-value-42") != "[secret:once]" {
		t.Error("command value not redacted")
	}
}

// References: only ${secret:NAME}; a malformed one is an error.
func TestRefsAndExpand(t *testing.T) {
	t.Setenv("GB_TEST_SECRET_TOKEN", tok)
	s := mustNew(t, map[string]Source{"gh": {Env: "GB_TEST_SECRET_TOKEN"}})
	if names, err := Refs("Bearer ${secret:gh} ${secret:db_2}"); err != nil || strings.Join(names, ",") != "gh,db_2" {
		t.Errorf("Refs = %v, %v", names, err)
	}
	for _, bad := range []string{"${secret:gh", "${secret:GH}", "${secret:}", "${secret:a b}"} {
		if _, err := Refs(bad); err == nil {
			t.Errorf("Refs(%q) accepted", bad)
		}
	}
	got, err := s.Expand(context.Background(), "Bearer ${secret:gh}!", nil)
	if err != nil || got != "Bearer "+tok+"!" {
		t.Errorf("Expand = %q, %v", got, err)
	}
	if got, err := (*Store)(nil).Expand(context.Background(), "plain $HOME", nil); err != nil || got != "plain $HOME" {
		t.Errorf("nil store, no reference: %q, %v", got, err)
	}
	if _, err := (*Store)(nil).Expand(context.Background(), "${secret:gh}", nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("nil store: %v", err)
	}
	if !Mentions("x${secret:y}") || Mentions("$secret") {
		t.Error("Mentions")
	}
	if _, err := s.Expand(context.Background(), "${secret:other}", nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown: %v", err)
	}
}
