package cmdpolicy

import (
	"encoding/json"
	"strings"
	"testing"
)

// testPolicy: rm and gb_secret denied, git push asks, curl asks, the
// rest allowed; unknown asks.
func testPolicy(t testing.TB, opts ...Option) *Policy {
	t.Helper()
	p, err := New(Config{
		Default: "allow",
		Unknown: "ask",
		Rules: []Rule{
			{Command: "rm", Decision: "deny"},
			{Command: "git", Args: []string{"push", ".*"}, Decision: "ask"},
			{Command: "curl", Decision: "ask"},
			{Command: "gb_secret", Decision: "deny"},
			{Command: "git", Args: []string{"status"}, Decision: "allow"},
		},
	}, append([]Option{WithGates("gb_secret", "read_file")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckScript(t *testing.T) {
	p := testPolicy(t)
	cases := []struct {
		script string
		want   Decision
		src    Source // "" : any
	}{
		// plain commands
		{"ls -l", Allow, SourceDefault},
		{"rm -rf x", Deny, SourceRule},
		{"", Allow, SourceNone},
		{"# rm x", Allow, SourceNone},
		{"echo rm", Allow, SourceDefault},
		{"'r'm x", Deny, SourceRule},
		{`r\m x`, Deny, SourceRule},
		{`"rm" x`, Deny, SourceRule},
		{"/bin/rm x", Deny, SourceRule},
		{"/bin/ls x", Allow, SourceDefault}, // a system directory: by its name
		{"/usr/bin/env rm x", Deny, SourceRule},
		{"./ls", Ask, SourceUnknown}, // a path runs whatever is there
		{"/tmp/ls", Ask, SourceUnknown},
		{"/usr/bin/../../tmp/ls", Ask, SourceUnknown},
		{"/usr/bin/x/ls", Ask, SourceUnknown},
		{"ws/ls", Ask, SourceUnknown},
		// lists, pipes, subshells, groups
		{"ls | rm x", Deny, SourceRule},
		{"ls && rm x", Deny, SourceRule},
		{"ls || rm x", Deny, SourceRule},
		{"ls; rm x", Deny, SourceRule},
		{"ls & rm x", Deny, SourceRule},
		{"(rm x)", Deny, SourceRule},
		{"{ rm x; }", Deny, SourceRule},
		{"! rm x", Deny, SourceRule},
		{"time rm x", Deny, SourceRule},
		{"coproc rm x", Deny, SourceRule},
		// substitutions
		{"echo $(rm x)", Deny, SourceRule},
		{"echo `rm x`", Deny, SourceRule},
		{"echo \"$(rm x)\"", Deny, SourceRule},
		{"diff <(rm x) <(ls)", Deny, SourceRule},
		{"cat > >(rm x)", Deny, SourceRule},
		{"echo ${x:-$(rm y)}", Deny, SourceRule},
		{"echo $(( $(rm y) + 1 ))", Deny, SourceRule},
		{"x=$(rm y)", Deny, SourceRule},
		{"x=$(ls y)", Allow, SourceDefault},
		{"export x=$(rm y)", Deny, SourceRule},
		{"local -a x=($(rm y))", Deny, SourceRule},
		{"a[$(rm y)]=1", Deny, SourceRule},
		{"echo hi > $(rm y)", Deny, SourceRule},
		{"cat <<EOF\n$(rm y)\nEOF\n", Deny, SourceRule},
		{"cat <<'EOF'\n$(rm y)\nEOF\n", Allow, SourceDefault}, // a quoted here-doc is text
		// compound commands
		{"if true; then rm x; fi", Deny, SourceRule},
		{"if rm x; then :; fi", Deny, SourceRule},
		{"if true; then :; else rm x; fi", Deny, SourceRule},
		{"while true; do rm x; done", Deny, SourceRule},
		{"until rm x; do :; done", Deny, SourceRule},
		{"for f in a b; do rm $f; done", Deny, SourceRule},
		{"for f in $(rm x); do :; done", Deny, SourceRule},
		{"for ((i=0;i<3;i++)); do rm x; done", Deny, SourceRule},
		{"case $x in a) rm x;; esac", Deny, SourceRule},
		{"case $(rm x) in a) :;; esac", Deny, SourceRule},
		{"[[ -f $(rm x) ]]", Deny, SourceRule},
		{"(( $(rm x) ))", Deny, SourceRule},
		{"select x in a; do rm x; done", Deny, SourceRule},
		// functions and aliases
		{"f() { rm x; }", Deny, SourceRule},
		{"ls() { rm -rf /; }; ls", Deny, SourceRule},
		{"rm() { echo hi; }; rm x", Deny, SourceRule},
		{"function f { rm x; }", Deny, SourceRule},
		{"alias ls='rm -rf /'; ls", Deny, SourceRule},
		{"alias ll='ls -l'", Allow, SourceDefault},
		{"alias ls=$x", Ask, SourceUnknown},
		{"trap 'rm x' EXIT", Deny, SourceRule},
		{"trap \"$x\" EXIT", Ask, SourceUnknown},
		// dynamic names
		{"$cmd x", Ask, SourceUnknown},
		{"${cmd} x", Ask, SourceUnknown},
		{"\"$cmd\" x", Ask, SourceUnknown},
		{"$(echo rm) x", Ask, SourceUnknown},
		{"r${x}m x", Ask, SourceUnknown},
		{"r* x", Ask, SourceUnknown},
		{"{rm,x}", Ask, SourceUnknown},
		{"~/bin/tool", Ask, SourceUnknown},
		{"$'rm' x", Ask, SourceUnknown},
		{"[ -f x ]", Allow, SourceDefault},
		{"eval \"$x\"", Ask, SourceUnknown},
		{"eval 'rm x'", Deny, SourceRule},
		{"eval ls -l", Allow, SourceDefault},
		{". ./script.sh", Ask, SourceUnknown},
		{"source x", Ask, SourceUnknown},
		{"PATH=.:$PATH; ls", Ask, SourceUnknown},
		{"export PATH=/tmp", Ask, SourceUnknown},
		{"BASH_ENV=x bash -c ls", Ask, SourceUnknown},
		{"enable -f ./x.so ls", Ask, SourceUnknown},
		{"BASH_ALIASES[ls]='rm -rf /'; ls", Ask, SourceUnknown},
		{"BASH_CMDS[ls]=/bin/rm; ls x", Ask, SourceUnknown},
		{"env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls", Ask, SourceUnknown},
		{"zsh -c '=rm x'", Ask, SourceUnknown},
		{"parallel rm ::: a b", Deny, SourceRule},
		{"parallel -j 4 rm ::: a", Deny, SourceRule},
		{"pkexec rm x", Deny, SourceRule},
		{"unbuffer rm x", Deny, SourceRule},
		{"flock /tmp/l rm x", Deny, SourceRule},
		{"flock /tmp/l -c 'ls'", Ask, SourceUnknown},
		{"hash -p ./evil ls", Ask, SourceUnknown},
		// wrappers with a static target
		{"env FOO=1 rm x", Deny, SourceRule},
		{"env -i -u HOME rm x", Deny, SourceRule},
		{"env -- rm x", Deny, SourceRule},
		{"env PATH=. ls", Ask, SourceUnknown},
		{"env -S 'rm x'", Ask, SourceUnknown},
		{"env", Allow, SourceDefault},
		{"xargs rm", Deny, SourceRule},
		{"xargs -0 -n 1 rm", Deny, SourceRule},
		{"xargs -I{} rm {}", Deny, SourceRule},
		{"timeout 5 rm x", Deny, SourceRule},
		{"timeout -s KILL 5 rm x", Deny, SourceRule},
		{"timeout --signal=KILL 5s rm x", Deny, SourceRule},
		{"command rm x", Deny, SourceRule},
		{"command -v rm", Allow, SourceDefault},
		{"builtin rm", Deny, SourceRule},
		{"exec rm x", Deny, SourceRule},
		{"exec -a foo rm x", Deny, SourceRule},
		{"nohup rm x &", Deny, SourceRule},
		{"nice -n 5 rm x", Deny, SourceRule},
		{"sudo -u root rm x", Deny, SourceRule},
		{"sudo -s", Ask, SourceUnknown},
		{"sudo --weird rm x", Ask, SourceUnknown},
		{"stdbuf -o0 rm x", Deny, SourceRule},
		{"setsid rm x", Deny, SourceRule},
		{"strace -f -o log rm x", Deny, SourceRule},
		{"busybox rm x", Deny, SourceRule},
		{"busybox sh -c 'rm x'", Deny, SourceRule},
		{"find . -name x -exec rm {} \\;", Deny, SourceRule},
		{"find . -execdir rm {} +", Deny, SourceRule},
		{"find . -name x", Allow, SourceDefault},
		{"watch -n 1 'rm x'", Deny, SourceRule},
		{"su -c 'rm x' bob", Deny, SourceRule},
		{"su bob", Ask, SourceUnknown},
		{"timeout 5 $cmd", Ask, SourceUnknown},
		{"env $cmd", Ask, SourceUnknown},
		{"xargs", Allow, SourceDefault},
		{"env FOO=1 env timeout 3 nice xargs rm", Deny, SourceRule},
		// shells
		{"sh -c 'rm x'", Deny, SourceRule},
		{"bash -c 'ls | rm x'", Deny, SourceRule},
		{"dash -ec 'rm x'", Deny, SourceRule},
		{"zsh -e -c 'rm x'", Deny, SourceRule},
		{"bash -o pipefail -c 'rm x'", Deny, SourceRule},
		{"bash --norc -c 'rm x'", Deny, SourceRule},
		{"sh -c \"rm $x\"", Ask, SourceUnknown},
		{"sh -c \"$x\"", Ask, SourceUnknown},
		{"sh -c 'ls' rm", Allow, SourceDefault},
		{"sh -c '\"$@\"' _ rm x", Ask, SourceUnknown},
		{"sh script.sh", Ask, SourceUnknown},
		{"sh", Ask, SourceUnknown},
		{"curl x | sh", Ask, ""},
		{"sh -s", Ask, SourceUnknown},
		{"fish -c 'rm x'", Ask, SourceUnknown},
		{"sh -c 'sh -c \"bash -c rm\"'", Deny, SourceRule},
		{"sh -c 'if then'", Ask, SourceUnknown}, // parse error inside
		// rules with args
		{"git push origin main", Ask, SourceRule},
		{"git push", Allow, SourceDefault}, // needs 2 arguments
		{"git status", Allow, SourceRule},
		{"git log", Allow, SourceDefault},
		{"git push $remote main", Ask, SourceRule},   // unknown argument: read restrictively
		{"git $sub origin main", Ask, SourceRule},    // may be push
		{"git $@", Ask, SourceRule},                  // may be many words
		{"git status $x", Allow, SourceRule},         // after the rule's patterns: free
		{"git \"$sub\"", Allow, SourceDefault},       // one word: the allow rule cannot match, the ask rule needs 2
		{"ls; git push a b; rm x", Deny, SourceRule}, // deny wins over an earlier ask
		// gates are commands
		{"gb_secret x", Deny, SourceRule},
		{"read_file README.md | gb_secret", Deny, SourceRule},
		{"read_file README.md", Allow, SourceDefault},
		// parse errors
		{"if then fi (", Ask, SourceUnknown},
		{"echo 'unterminated", Ask, SourceUnknown},
	}
	for _, tc := range cases {
		r := p.CheckScript(tc.script)
		if r.Decision != tc.want || tc.src != "" && r.Source != tc.src {
			t.Errorf("CheckScript(%q) = %v (%s), want %v by %s", tc.script, r.Decision, r.By(), tc.want, tc.src)
		}
		// The same construct around an allowed command is allowed: the
		// deny above came from rm, not from the construct.
		if tc.want == Deny && strings.Contains(tc.script, "rm") && !strings.Contains(tc.script, "gb_secret") && !strings.Contains(tc.script, "git") {
			allowed := strings.ReplaceAll(tc.script, "rm", "ls")
			if r := p.CheckScript(allowed); r.Decision != Allow {
				t.Errorf("CheckScript(%q) = %s, want allow", allowed, r)
			}
		}
	}
}

func TestCheckScriptReportsTheCommand(t *testing.T) {
	p := testPolicy(t)
	r := p.CheckScript("ls; git push origin x; echo $(rm -rf /tmp/y)")
	if r.Decision != Deny || r.RuleIndex != 0 || r.Rule != "{command: rm, decision: deny}" {
		t.Fatalf("got %+v", r)
	}
	if got := strings.Join(r.Command, " "); got != "rm -rf /tmp/y" {
		t.Errorf("command %q", got)
	}
	if s := r.String(); s != "deny: command rm -rf /tmp/y (rule 0 {command: rm, decision: deny})" {
		t.Errorf("String() = %q", s)
	}
	r = p.CheckScript("gb_secret a")
	if !r.Gate || !strings.Contains(r.String(), "gate gb_secret") {
		t.Errorf("gate not named: %s", r)
	}
	r = p.CheckScript("$cmd x")
	if r.Source != SourceUnknown || !strings.Contains(r.String(), "$cmd x") || r.Why == "" {
		t.Errorf("unknown not explained: %s", r)
	}
}

func TestCheckArgv(t *testing.T) {
	p := testPolicy(t)
	cases := []struct {
		argv []string
		want Decision
	}{
		{[]string{"ls", "-l"}, Allow},
		{[]string{"rm", "x"}, Deny},
		{[]string{"/usr/bin/rm", "x"}, Deny},
		{[]string{"/bin/sh", "-c", "ls"}, Allow},
		{[]string{"./build.sh"}, Ask},
		{[]string{"sh", "-c", "ls; rm x"}, Deny},
		{[]string{"sh", "-ec", "rm x"}, Deny},
		{[]string{"bash", "-e", "-c", "rm x"}, Deny},
		{[]string{"sh", "-c", "ls"}, Allow},
		{[]string{"sh", "-c", "$x"}, Ask},
		{[]string{"sh", "./script.sh"}, Ask},
		{[]string{"busybox", "sh", "-c", "rm x"}, Deny},
		{[]string{"env", "A=1", "sh", "-c", "rm x"}, Deny},
		{[]string{"git", "push", "origin", "main"}, Ask},
		// argv words are not shell code: no expansion
		{[]string{"echo", "$(rm x)"}, Allow},
		{[]string{"$cmd"}, Allow}, // a program named "$cmd": allowed by default
		{[]string{"rm"}, Deny},
		{[]string{"xargs", "rm"}, Deny},
		{[]string{"gb_secret"}, Deny},
	}
	for _, tc := range cases {
		if r := p.CheckArgv(tc.argv); r.Decision != tc.want {
			t.Errorf("CheckArgv(%q) = %s, want %v", tc.argv, r, tc.want)
		}
	}
}

func TestCheckGate(t *testing.T) {
	p := testPolicy(t)
	if r := p.CheckGate("gb_secret", []string{"a"}); r.Decision != Deny || !r.Gate || r.RuleIndex != 3 {
		t.Errorf("gb_secret: %+v", r)
	}
	if r := p.CheckGate("read_file", []string{"$(rm x)"}); r.Decision != Allow {
		t.Errorf("read_file's arguments are data: %s", r)
	}
	// The gate's real arguments decide: a script computed them.
	if r := p.CheckGate("git", []string{"push", "origin"}); r.Decision != Ask {
		t.Errorf("git push: %s", r)
	}
	var nilPolicy *Policy
	if r := nilPolicy.CheckGate("gb_secret", nil); r.Decision != Allow {
		t.Errorf("no policy: %s", r)
	}
}

func TestNoPolicyChangesNothing(t *testing.T) {
	var p *Policy
	for _, s := range []string{"rm -rf /", "$x", "if then"} {
		if r := p.CheckScript(s); r.Decision != Allow || r.Err() != nil {
			t.Errorf("nil policy: %q: %s", s, r)
		}
	}
	if r := p.CheckArgv([]string{"rm"}); r.Decision != Allow {
		t.Errorf("nil policy: %s", r)
	}
}

func TestRuleOrderDenyWins(t *testing.T) {
	// An allow rule first does not override a later deny rule.
	p, err := New(Config{Rules: []Rule{
		{Command: "rm", Decision: "allow"},
		{Command: "rm", Args: []string{"-rf"}, Decision: "deny"},
		{Command: "rm", Args: []string{"-r.*"}, Decision: "ask"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.CheckArgv([]string{"rm", "-rf", "/"}); r.Decision != Deny || r.RuleIndex != 1 {
		t.Errorf("rm -rf: %s", r)
	}
	// A rule naming a shell applies to it, with -c too.
	q, err := New(Config{Rules: []Rule{{Command: "bash", Decision: "deny"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := q.CheckArgv([]string{"bash", "-c", "ls"}); r.Decision != Deny {
		t.Errorf("bash denied by a rule: %s", r)
	}
	if r := p.CheckArgv([]string{"rm", "-r", "x"}); r.Decision != Ask || r.RuleIndex != 2 {
		t.Errorf("rm -r: %s", r)
	}
	if r := p.CheckArgv([]string{"rm", "x"}); r.Decision != Allow || r.RuleIndex != 0 {
		t.Errorf("rm x: %s", r)
	}
	// Patterns are anchored: -rf does not match -rfx or x-rf.
	if r := p.CheckArgv([]string{"rm", "x-rf"}); r.Decision != Allow {
		t.Errorf("rm x-rf: %s", r)
	}
}

func TestDefaultDenyAllowlist(t *testing.T) {
	p, err := New(Config{Default: "deny", Unknown: "deny", Rules: []Rule{
		{Command: "ls", Decision: "allow"},
		{Command: "git", Args: []string{"status|log|diff"}, Decision: "allow"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]Decision{
		"ls -l":               Allow,
		"git log -3":          Allow,
		"git push":            Deny,
		"git $x":              Deny, // an allow rule never matches an unknown word
		"ls | wc -l":          Deny,
		"env ls":              Deny,  // env is not allowed
		"sh -c 'ls -l'":       Allow, // a shell with -c is decided by its script
		"bash -ec 'git log'":  Allow,
		"sh -c 'rm x'":        Deny,
		"sh script.sh":        Deny, // a shell without -c is a command (and unknown)
		"bash":                Deny,
		"ls $(cat /etc/shdw)": Deny,
	} {
		if r := p.CheckScript(s); r.Decision != want {
			t.Errorf("%q: %s, want %v", s, r, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		key string
	}{
		{Config{Default: "maybe"}, "policy.commands.default"},
		{Config{Unknown: "yes"}, "policy.commands.unknown"},
		{Config{Rules: []Rule{{Command: "", Decision: "deny"}}}, "policy.commands.rules[0].command"},
		{Config{Rules: []Rule{{Command: "/bin/rm", Decision: "deny"}}}, "policy.commands.rules[0].command"},
		{Config{Rules: []Rule{{Command: "rm"}}}, "policy.commands.rules[0].decision"},
		{Config{Rules: []Rule{{Command: "rm", Decision: "deny"}, {Command: "git", Args: []string{"(", "x"}, Decision: "ask"}}}, "policy.commands.rules[1].args[0]"},
	} {
		_, err := New(tc.cfg)
		ce, ok := err.(*ConfigError)
		if !ok || ce.Key != tc.key || ce.Hint() == "" {
			t.Errorf("%+v: got %v, want an error naming %s", tc.cfg, err, tc.key)
		}
	}
}

func TestShowSource(t *testing.T) {
	p := testPolicy(t)
	for script, want := range map[string]string{
		`for f in *; do rm "$f"; done`: `deny: command rm "$f" (rule 0`,
		`rm 'a b' "c"`:                 `deny: command rm 'a b' "c" (rule 0`,
		"rm $'\x1b[2J'":                `deny: command rm "$'\x1b[2J'" (rule 0`, // a control character: quoted
		`r\m x`:                        `deny: command "r\\m" x (rule 0`,        // a backslash: quoted
		"rm '\x1b[2J'":                 "deny: command rm \"'\\x1b[2J'\" (rule 0",
	} {
		got := p.CheckScript(script).String()
		if !strings.HasPrefix(got, want) {
			t.Errorf("%q:\n got %q\nwant %q…", script, got, want)
		}
	}
}

func TestShowCommandEscapes(t *testing.T) {
	got := ShowCommand([]string{"rm", "a\nb", "\x1b[2J", "\xff", "", "ok", strings.Repeat("x", 300)})
	if strings.ContainsAny(got, "\n\x1b\xff") {
		t.Errorf("control bytes shown raw: %q", got)
	}
	if !strings.Contains(got, `"a\nb"`) || !strings.Contains(got, "…(300 bytes)") {
		t.Errorf("got %q", got)
	}
}

func TestErrorData(t *testing.T) {
	p := testPolicy(t)
	err := p.CheckArgv([]string{"sh", "-c", "ls; rm -rf build"}).Err()
	de, ok := IsDenied(err)
	if !ok {
		t.Fatalf("not a DeniedError: %v", err)
	}
	b, jerr := json.Marshal(de.Data())
	if jerr != nil {
		t.Fatal(jerr)
	}
	want := `{"kind":"policy_denied","decision":"deny","source":"rule","rule_index":0,"rule":"{command: rm, decision: deny}","command":["rm","-rf","build"],"shell":true,"hint":`
	if !strings.HasPrefix(string(b), want) {
		t.Errorf("data\n got %s\nwant %s…", b, want)
	}
	if err.Error() != "policy: command rm -rf build denied by rule 0 {command: rm, decision: deny}" {
		t.Errorf("message %q", err)
	}
	if p.CheckArgv([]string{"ls"}).Err() != nil {
		t.Error("allow has an error")
	}
}
