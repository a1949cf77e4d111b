//go:build unix

package gates_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
)

// fakeIsolator records what it is asked and runs the program on the host
// (or refuses, or says it cannot run here).
type fakeIsolator struct {
	mu       sync.Mutex
	specs    []gates.IsolateSpec
	dirs     []string
	cleanups int
	waited   []bool // per cleanup: had cmd been waited for
	err      error  // Isolate's
	checkErr error  // Check's
}

type hintErr struct{ error }

func (hintErr) Hint() string { return "install the thing" }

func (f *fakeIsolator) Isolate(_ context.Context, cmd *exec.Cmd, s gates.IsolateSpec) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.specs = append(f.specs, s)
	f.dirs = append(f.dirs, cmd.Dir)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.cleanups++
		f.waited = append(f.waited, cmd.ProcessState != nil)
	}, nil
}

func (f *fakeIsolator) Check(context.Context) error { return f.checkErr }

func commandKind(t *testing.T) gates.Kind {
	k, err := gates.NewKindRegistry().Lookup(gates.KindCommand)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A command gate runs isolated by default and fails closed: with no
// isolator, or one that cannot run here, the gate is refused when it is
// made, with a hint naming both fixes; isolate.host runs it on the host.
func TestCommandKindIsolationRequired(t *testing.T) {
	k, ctx := commandKind(t), context.Background()
	spec := gates.CommandSpec{Name: "gb_true", Command: []string{"true"}}
	var se *gates.SettingError
	_, err := k.New(ctx, spec, gates.Env{})
	if !errors.As(err, &se) || se.Field != "isolate" || !strings.Contains(se.Help("gates.commands[0]"), "gates.commands[0].isolate: {host: true}") {
		t.Errorf("no isolator: %v", err)
	}
	_, err = k.New(ctx, spec, gates.Env{Isolator: &fakeIsolator{checkErr: hintErr{errors.New("bwrap: no user namespaces")}}})
	if !errors.As(err, &se) || se.Field != "isolate" || !strings.Contains(err.Error(), "no user namespaces") ||
		!strings.Contains(se.Help("k"), "install the thing") || !strings.Contains(se.Help("k"), "k.isolate: {host: true}") {
		t.Errorf("isolator that cannot run: %v", err)
	}
	spec.Isolate.Host = true
	if _, err := k.New(ctx, spec, gates.Env{}); err != nil {
		t.Errorf("host: true: %v", err)
	}
	spec.Isolate.Read = []string{"/usr"}
	if _, err := k.New(ctx, spec, gates.Env{}); !errors.As(err, &se) || se.Field != "isolate.host" {
		t.Errorf("host with read: %v", err)
	}
}

// The paths an isolated gate is given are checked when it is made: each
// absolute and existing, none overlapping a session directory (read or
// write, the gate's dir too), and no write path holding or inside a
// protected path of the workspace (isolate.write: [WORKSPACE] would let
// the gate plant .git/hooks, which the host's next git runs).
func TestCommandKindIsolatePaths(t *testing.T) {
	k, ctx := commandKind(t), context.Background()
	ws := t.TempDir()
	sessions := t.TempDir()
	for _, d := range []string{".git/hooks", "src"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	keep := t.TempDir() // where a secret file is kept
	os.WriteFile(filepath.Join(keep, "db_pass"), []byte("db-pass-0123456789"), 0o600)
	store, err := secrets.New(map[string]secrets.Source{"db": {File: filepath.Join(keep, "db_pass")}}, secrets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env := gates.Env{Workspace: ws, Isolator: &fakeIsolator{}, Protected: []string{".git"}, Sessions: []string{sessions}, Secrets: store}
	for _, tc := range []struct {
		name  string
		iso   gates.IsolateSpec
		dir   string
		field string // "" = accepted
	}{
		{"ok", gates.IsolateSpec{Read: []string{ws}, Write: []string{filepath.Join(ws, "src")}}, ws, ""},
		{"relative", gates.IsolateSpec{Read: []string{"src"}}, "", "isolate.read"},
		{"missing", gates.IsolateSpec{Read: []string{filepath.Join(ws, "nope")}}, "", "isolate.read"},
		{"write the workspace", gates.IsolateSpec{Write: []string{ws}}, "", "isolate.write"},
		{"write .git", gates.IsolateSpec{Write: []string{filepath.Join(ws, ".git")}}, "", "isolate.write"},
		{"write hooks", gates.IsolateSpec{Write: []string{filepath.Join(ws, ".git", "hooks")}}, "", "isolate.write"},
		{"read the sessions", gates.IsolateSpec{Read: []string{sessions}}, "", "isolate.read"},
		{"read above the sessions", gates.IsolateSpec{Read: []string{filepath.Dir(sessions)}}, "", "isolate.read"},
		{"write in the sessions", gates.IsolateSpec{Write: []string{sessions}}, "", "isolate.write"},
		{"dir in the sessions", gates.IsolateSpec{}, sessions, "dir"},
		{"read a secret's dir", gates.IsolateSpec{Read: []string{keep}}, "", "isolate.read"},
		{"read a secret file", gates.IsolateSpec{Read: []string{filepath.Join(keep, "db_pass")}}, "", "isolate.read"},
		{"write a secret's dir", gates.IsolateSpec{Write: []string{keep}}, "", "isolate.write"},
		{"dir holds a secret", gates.IsolateSpec{}, keep, "dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := gates.CommandSpec{Name: "gb_true", Command: []string{"true"}, Dir: tc.dir, Isolate: tc.iso}
			_, err := k.New(ctx, spec, env)
			var se *gates.SettingError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &se) || se.Field != tc.field || se.Help("x") == ""):
				t.Errorf("err %v, want a SettingError for %s with a hint", err, tc.field)
			}
		})
	}
}

// An isolated gate's program starts through the isolator, with what the
// spec lists plus its fixed HOME; without a HOME of its own it gets the
// sandbox's private /tmp (no host directory is made for it); cleanup
// runs once, after the program was waited for. An Isolate error runs
// nothing.
func TestCommandIsolatedCall(t *testing.T) {
	k, ctx := commandKind(t), context.Background()
	home, dir := t.TempDir(), t.TempDir()
	fake := &fakeIsolator{}
	env := gates.Env{Isolator: fake}
	gs, err := k.New(ctx, gates.CommandSpec{Name: "gb_env", Command: []string{"sh", "-c", `echo "$HOME"`}, Dir: dir,
		Isolate: gates.IsolateSpec{Read: []string{"/usr"}, Network: true}}, env)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code, err := gs[0].Call(ctx, &gates.Call{Stdout: &out, Stderr: &errOut})
	if err != nil || code != 0 || out.String() != "/tmp\n" {
		t.Errorf("call: %d %v %q", code, err, out.String())
	}
	gs, err = k.New(ctx, gates.CommandSpec{Name: "gb_env", Command: []string{"true"}, Home: home,
		Isolate: gates.IsolateSpec{Read: []string{"/usr"}}}, env)
	if err != nil {
		t.Fatal(err)
	}
	gs[0].Call(ctx, &gates.Call{Stdout: &out, Stderr: &errOut})
	fake.mu.Lock()
	if len(fake.specs) != 2 || !fake.specs[0].Network || strings.Join(fake.specs[0].Read, ",") != "/usr" || fake.dirs[0] != dir ||
		strings.Join(fake.specs[1].Read, ",") != "/usr,"+home {
		t.Errorf("isolated with %+v in %q", fake.specs, fake.dirs)
	}
	if fake.cleanups != 2 || !fake.waited[0] || !fake.waited[1] {
		t.Errorf("cleanups %d, after wait %v", fake.cleanups, fake.waited)
	}
	fake.mu.Unlock()

	marker := filepath.Join(t.TempDir(), "ran")
	fake.err = errors.New("no sandbox today")
	gs, err = k.New(ctx, gates.CommandSpec{Name: "gb_touch", Command: []string{"touch", marker}}, env)
	if err != nil {
		t.Fatal(err)
	}
	code, err = gs[0].Call(ctx, &gates.Call{Stdout: &out, Stderr: &errOut})
	if err == nil || !strings.Contains(err.Error(), "no sandbox today") {
		t.Errorf("Isolate failed, call: %d %v", code, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program ran although Isolate failed")
	}
}

// An isolated gate's paths reach the isolator resolved, as they were
// checked: a configured link (/srv/repo -> /data/repo) is followed once,
// when the gates are made, so that the isolator can refuse a link that
// appears later (bwrap.TestIsolateLinkedPathRefused) without refusing
// this one.
func TestCommandIsolatedPathsResolved(t *testing.T) {
	k, ctx := commandKind(t), context.Background()
	base := t.TempDir()
	real := filepath.Join(base, "data")
	os.Mkdir(real, 0o755)
	link := filepath.Join(base, "repo")
	os.Symlink(real, link)
	fake := &fakeIsolator{}
	gs, err := k.New(ctx, gates.CommandSpec{Name: "gb_ls", Command: []string{"true"}, Dir: link,
		Isolate: gates.IsolateSpec{Read: []string{link}, Write: []string{link}}}, gates.Env{Isolator: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs[0].Call(ctx, &gates.Call{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.specs) != 1 || !slices.Equal(fake.specs[0].Read, []string{real}) || !slices.Equal(fake.specs[0].Write, []string{real}) || fake.dirs[0] != real {
		t.Errorf("isolated with %+v in %q, want %s", fake.specs, fake.dirs, real)
	}
}
