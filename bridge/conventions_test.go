package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/sandbox"
)

// conventionsRegistry has the built-in gates over ws and "rt", a gate with
// params as a runtime gate has them, which records the arguments it runs
// with.
func conventionsRegistry(t *testing.T, ws string, got *[][]string, mu *sync.Mutex) *gates.Registry {
	t.Helper()
	reg := gates.NewRegistry()
	if err := gates.RegisterBuiltins(reg, gates.Options{Root: ws}); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(gates.Func(gates.Spec{Name: "rt", Summary: "Look a word up.", Usage: "rt WORD [LANG]",
		Params: []gates.Param{{Name: "word", Required: true, Description: "the word"}, {Name: "lang", Description: "a language"}}},
		func(ctx context.Context, c *gates.Call) (int, error) {
			mu.Lock()
			*got = append(*got, c.Args)
			mu.Unlock()
			return 0, nil
		}))
	return reg
}

func runIn(t *testing.T, cfg Config, ws, script string) *Result {
	t.Helper()
	cfg.Dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg, shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", script}, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// "--help" alone prints any gate's usage, exit 0, without running it or
// asking for approval; one JSON object of a gate's parameters becomes the
// words its usage describes, and approval sees those words.
func TestGateConventions(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("one\ntwo needle\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran, asked [][]string
	cfg := Config{Gates: conventionsRegistry(t, ws, &ran, &mu), Approve: func(ctx context.Context, spec gates.Spec, req *Request) error {
		mu.Lock()
		asked = append(asked, append([]string{spec.Name}, req.Args...))
		mu.Unlock()
		return nil
	}}
	res := runIn(t, cfg, ws, `
read_file --help; echo "rc=$?"
rt -h; echo "rc=$?"
read_file '{"path":"f.txt","offset":2}'; echo "rc=$?"
search '{"pattern":"needle"}'; echo "rc=$?"
rt '{"word":"-x","lang":"fr"}'; echo "rc=$?"
rt '{"lang":"fr"}'; echo "rc=$?"
submit '{"score":3}'
`)
	out := res.Stdout
	for _, want := range []string{
		"usage: read_file [--offset N] [--limit N] PATH\n", "  offset (option --offset VALUE, integer): Start at line N",
		"usage: rt WORD [LANG]\n\nLook a word up.\n\nparameters:\n  word (required): the word\n  lang: a language\n\nThe parameters may also come as one JSON object argument: rt '{\"word\":\"…\"}'\nrc=0\n",
		"rc=0\ntwo needle\nthree\nrc=0\n",
		"f.txt:2:two needle\nrc=0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "rc=0") != 5 || !strings.HasSuffix(out, "rc=2\n") {
		t.Errorf("exit codes:\n%s", out)
	}
	if !strings.Contains(res.Stderr, `gatebridge: rt: JSON parameters: "lang" is given but "word" before it is not: positional parameters are passed in order (usage: rt WORD [LANG])`) {
		t.Errorf("stderr %q", res.Stderr)
	}
	if res.Answer == nil || *res.Answer != `{"score":3}` {
		t.Errorf("submit '{\"score\":3}' must submit that JSON, answer %v", res.Answer)
	}
	mu.Lock()
	defer mu.Unlock()
	// rt is not known to read "--": "-x" reaches it as typed.
	if len(ran) != 1 || strings.Join(ran[0], "|") != "-x|fr" {
		t.Errorf("rt ran with %q", ran)
	}
	var approvals []string
	for _, a := range asked {
		approvals = append(approvals, strings.Join(a, "|"))
	}
	want := []string{"read_file|--offset|2|f.txt", "search|needle", "rt|-x|fr", `submit|{"score":3}`}
	if strings.Join(approvals, "\n") != strings.Join(want, "\n") {
		t.Errorf("approval asked for\n%s\nwant (no help request, converted words)\n%s", strings.Join(approvals, "\n"), strings.Join(want, "\n"))
	}
	var recorded []string
	for _, c := range res.Calls {
		recorded = append(recorded, c.Gate+"|"+strings.Join(c.Args, "|")+"|"+string(c.Decision))
	}
	if !strings.Contains(strings.Join(recorded, "\n"), "read_file|--offset|2|f.txt|ran") {
		t.Errorf("records %q: want the words the gate ran with", recorded)
	}
}

// A JSON array cannot make a call of more arguments than
// bridge.limits.max_args allows.
func TestParamArgsMaxArgs(t *testing.T) {
	reg := gates.NewRegistry()
	ran := false
	reg.MustRegister(gates.Func(gates.Spec{Name: "many", Params: []gates.Param{{Name: "items", Variadic: true}}},
		func(ctx context.Context, c *gates.Call) (int, error) { ran = true; return 0, nil }))
	res := run(t, Config{Gates: reg, Limits: Limits{MaxArgs: 4}}, `many '{"items":["a","b","c","d","e"]}'; echo "rc=$?"; many '{"items":["a","b"]}'; echo "rc=$?"`)
	if res.Stdout != "rc=126\nrc=0\n" || !strings.Contains(res.Stderr, "gatebridge: many: its JSON parameters make more than 4 arguments (limit set by bridge.limits.max_args)") {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if !ran {
		t.Error("the call within the limit did not run")
	}
}
