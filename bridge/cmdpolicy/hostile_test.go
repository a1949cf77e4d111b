package cmdpolicy

import (
	"strings"
	"testing"
)

// hostile are scripts built to make the check expensive. Each parses
// and holds only allowed commands, so without its limit it would be
// allowed (after the host spent seconds and hundreds of MiB on it, see
// BenchmarkCheckScriptHostile): with the limits each is unknown.
func hostile() map[string]string {
	const n = 300_000
	return map[string]string{
		"bytes":         ": " + strings.Repeat("a", 300<<10),               // one long word: over MaxScriptBytes
		"pipe chain":    strings.Repeat("a|", 60_000) + "a",                // over MaxNodes, before parsing
		"and chain":     strings.Repeat("a&&", 60_000) + "a",               // over MaxNodes
		"words":         "echo " + strings.Repeat("a ", n/4),               // over MaxNodes
		"arith":         "echo $((" + strings.Repeat("1+", 60_000) + "1))", // over MaxNodes
		"subshells":     strings.Repeat("( ", 300) + "a" + strings.Repeat(" )", 300),
		"cmd subst":     strings.Repeat("$(", 300) + "a" + strings.Repeat(")", 300),
		"if nest":       strings.Repeat("if a; then ", 300) + "a" + strings.Repeat("; fi", 300),
		"while nest":    strings.Repeat("while a; do ", 300) + "a" + strings.Repeat("; done", 300),
		"nested sh -c":  nestedSh(12),
		"nested eval":   strings.Repeat("eval ", 20) + "a",
		"nested env":    strings.Repeat("env ", 20) + "a",
		"nested alias":  nestedAlias(12),
		"dq cmd subst":  strings.Repeat(`"$(`, 300) + "a" + strings.Repeat(`)"`, 300),
		"brace groups":  strings.Repeat("{ ", 300) + "a" + strings.Repeat("; }", 300),
		"case nest":     strings.Repeat("case a in a) ", 300) + "a" + strings.Repeat(";; esac", 300),
		"function nest": strings.Repeat("f() { ", 300) + "a" + strings.Repeat("; }", 300),
	}
}

// nestedSh is sh -c 'sh -c ...' n deep, quoted right at each level.
func nestedSh(n int) string {
	s := "a"
	for range n {
		s = "sh -c " + shQuote(s)
	}
	return s
}

func nestedAlias(n int) string {
	s := "a"
	for range n {
		s = "alias x=" + shQuote(s)
	}
	return s
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestHostileScriptsAreUnknown(t *testing.T) {
	p := testPolicy(t)
	for name, s := range hostile() {
		r := p.CheckScript(s)
		if r.Decision != Ask || r.Source != SourceUnknown {
			t.Errorf("%s (%d bytes): %s; want unknown (a limit)", name, len(s), r)
		}
	}
}

func TestMaxNodes(t *testing.T) {
	// Within the token limit, the walk stops at MaxNodes: what is left
	// is not looked at, and the whole is unknown.
	p := testPolicy(t, WithLimits(Limits{MaxNodes: 1000}))
	s := strings.Repeat("ls; ", 600) + "rm x"
	if r := p.CheckScript(s); r.Decision != Ask || r.Source != SourceUnknown || !strings.Contains(r.Why, "1000 syntax nodes") {
		t.Errorf("got %s", r)
	}
	if r := testPolicy(t).CheckScript(s); r.Decision != Deny {
		t.Errorf("default limits: %s", r)
	}
}

func TestUnderTheLimitsIsDecided(t *testing.T) {
	p := testPolicy(t)
	for name, s := range map[string]string{
		"subshells":    strings.Repeat("( ", 50) + "rm x" + strings.Repeat(" )", 50),
		"nested sh -c": nestedSh(5),
		"pipe chain":   strings.Repeat("a|", 1000) + "a",
	} {
		r := p.CheckScript(s)
		if r.Source == SourceUnknown {
			t.Errorf("%s: %s; want decided", name, r)
		}
	}
	if r := p.CheckScript(strings.Repeat("a|", 1000) + "rm x"); r.Decision != Deny {
		t.Errorf("rm at the end of a long pipe: %s", r)
	}
}

func TestBadBytes(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{"ls\x00; rm x", "ls \x00", "ls \xff\xfe", "echo '\xff'", "\xff"} {
		if r := p.CheckScript(s); r.Decision != Ask || r.Source != SourceUnknown || strings.ContainsAny(r.String(), "\x00\xff") {
			t.Errorf("%q: %s", s, r)
		}
	}
	// An argv may hold any bytes (it is not parsed): they are shown escaped.
	r := p.CheckArgv([]string{"rm", "\x00\xff\x1b[2J"})
	if r.Decision != Deny || strings.ContainsAny(r.String(), "\x00\xff\x1b") {
		t.Errorf("argv: %q", r.String())
	}
}

// FuzzCheckScript: no input panics, and a denied command after any
// input is never allowed (found, or the whole is unknown).
func FuzzCheckScript(f *testing.F) {
	for _, s := range []string{"ls", "echo $(ls)", "f() { :; }", "cat <<E\nx\nE", "echo 'a", "if true; then :; fi", "case a in a) ;; esac", `echo \`, "sh -c 'ls'", "x=1", "#", "\xff", "eval"} {
		f.Add(s)
	}
	p := testPolicy(f)
	f.Fuzz(func(t *testing.T, s string) {
		p.CheckScript(s)
		if r := p.CheckScript(s + "\n;rm x"); r.Decision == Allow {
			t.Errorf("%q followed by rm: %s", s, r)
		}
	})
}

// BenchmarkCheckScriptHostile measures what the hostile scripts cost
// (go test -run X -bench Hostile -benchmem ./bridge/cmdpolicy).
func BenchmarkCheckScriptHostile(b *testing.B) {
	p := testPolicy(b)
	for name, s := range hostile() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				p.CheckScript(s)
			}
		})
	}
	for name, s := range map[string]string{
		"ordinary_70KiB":     strings.Repeat("ls -l | grep x && echo $(cat f) ; ", 2000), // 50k tokens
		"worst_under_limits": strings.Repeat("aaaa;", 49_000),                            // 245 KiB, 98k tokens: parsed and walked
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if r := p.CheckScript(s); r.Decision != Allow {
					b.Fatal(r)
				}
			}
		})
	}
}

// A script cannot put a control character into the reason of its
// decision, which the approval prompt shows as is (the rule line): an
// env NAME with ESC and \r would redraw the question the person answers.
func TestWhyHasNoControlCharacters(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{
		"env 'BASH_FUNC_\x1b[2J\rx%%=() { :; }' ls",
		"env $'BASH_FUNC_\\e[2J\\rx%%=() { :; }' ls",
	} {
		r := p.CheckScript(s)
		for _, msg := range []string{r.By(), (&DeniedError{Result: r}).Error(), r.String()} {
			if strings.ContainsAny(msg, "\x1b\r\n") {
				t.Errorf("%q: a control character in %q", s, msg)
			}
		}
	}
	r := p.CheckArgvEnv([]string{"ls"}, []string{"BASH_FUNC_\x1b[2J\rx%%=() { :; }"})
	if r.Decision != Ask || strings.ContainsAny(r.By(), "\x1b\r\n") {
		t.Errorf("env from the protocol: %s", r.By())
	}
}

// script (util-linux) and sg (shadow) run -c SCRIPT with a shell, like
// su -c: the script is checked; without -c they start a shell (unknown).
func TestScriptAndSgFollowed(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{`script -c 'rm x'`, `script -q --command 'rm x' /dev/null`, `script --command='rm x'`, `sg wheel -c 'rm x'`} {
		if r := p.CheckScript(s); r.Decision != Deny {
			t.Errorf("%s: %s, want deny", s, r)
		}
	}
	for _, s := range []string{`script -qc 'rm x'`, `sg wheel 'rm x'`, `script out.log`} {
		if r := p.CheckScript(s); r.Decision != Ask || r.Source != SourceUnknown {
			t.Errorf("%s: %s, want unknown", s, r)
		}
	}
	if r := p.CheckScript(`script -c 'ls' /dev/null`); r.Decision != Allow {
		t.Errorf("script -c ls: %s", r)
	}
}

// Bash arithmetic evaluates a variable's value as an expression and runs
// a command substitution in an array subscript in it: the string is data
// to the parser, code to bash. Each of these ran rm with rm denied.
func TestArithmeticSubscriptCode(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{
		`x='a[$(rm y)]'; echo $((x))`,
		`x='a[$(rm y)]'; [[ $x -eq 0 ]]`,
		`declare -i n; n='b[$(rm y)]'`,
		"x='a[`rm y`]'; (( x ))",
		`x="a[\$(rm y)]"; let x`,
		`x=a[\$\(rm\ y\)]; echo $((x))`,
	} {
		if r := p.CheckScript(s); r.Decision != Deny {
			t.Errorf("%s: %s, want deny", s, r)
		}
	}
	// A string with no subscript, or whose command is allowed, is data.
	for _, s := range []string{`echo 'costs $(5)'`, `x='a[$(ls)]'; echo $((x))`, `echo '[x]'`} {
		if r := p.CheckScript(s); r.Decision != Allow {
			t.Errorf("%s: %s, want allow", s, r)
		}
	}
}

// ${x@P} expands a value as a prompt, running its command substitutions
// (bash 4.4+): x='$(rm y)'; : "${x@P}" ran rm with rm denied.
func TestPromptExpansionIsUnknown(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{`x='$(rm y)'; : "${x@P}"`, `read x; echo ${x@P}`, `echo "${arr[0]@P}"`} {
		if r := p.CheckScript(s); r.Decision != Ask || r.Source != SourceUnknown {
			t.Errorf("%s: %s, want unknown", s, r)
		}
	}
	for _, s := range []string{`echo "${x@Q}"`, `echo ${x@U}`} {
		if r := p.CheckScript(s); r.Decision != Allow {
			t.Errorf("%s: %s, want allow", s, r)
		}
	}
}

// mapfile -C CALLBACK evaluates CALLBACK as a script: mapfile -C 'rm y;:'
// -c 1 a < f ran rm with rm denied.
func TestMapfileCallbackChecked(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{`mapfile -C 'rm y;:' -c 1 a < f`, `readarray -t -C 'rm y' a < f`, `mapfile -tC'rm y' a < f`, `mapfile -c1 -C "rm y" a`} {
		if r := p.CheckScript(s); r.Decision != Deny {
			t.Errorf("%s: %s, want deny", s, r)
		}
	}
	if r := p.CheckScript(`mapfile -C "$cb" a < f`); r.Decision != Ask || r.Source != SourceUnknown {
		t.Errorf("a callback not known: %s, want unknown", r)
	}
	for _, s := range []string{`mapfile -t lines < f`, `mapfile -d C a < f`, `mapfile -C 'echo' -c 1 a < f`} {
		if r := p.CheckScript(s); r.Decision != Allow {
			t.Errorf("%s: %s, want allow", s, r)
		}
	}
}

// compgen runs -C COMMAND and expands -W WORDLIST (command substitutions
// included), in any script: each ran rm with rm denied.
func TestCompgenChecked(t *testing.T) {
	p := testPolicy(t)
	for _, s := range []string{`compgen -C 'rm y' x`, `compgen -C rm x`, `compgen -W '$(rm y)' x`, "compgen -W 'a `rm y`' x", `compgen -W 'a <(rm y)' x`, `compgen -o default -C"rm y" x`} {
		if r := p.CheckScript(s); r.Decision != Deny {
			t.Errorf("%s: %s, want deny", s, r)
		}
	}
	for _, s := range []string{`compgen -W 'start stop' st`, `compgen -c`, `compgen -A function`} {
		if r := p.CheckScript(s); r.Decision != Allow {
			t.Errorf("%s: %s, want allow", s, r)
		}
	}
}
