package cmdpolicy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// A word is one argv word as far as it is known before the script runs.
type word struct {
	val    string // the value, when static
	src    string // as written (for messages)
	static bool   // val is what the shell will pass
	multi  bool   // may expand to zero or several words (unquoted expansion, glob, brace)
	shell  bool   // src is shell source (from a script), not an argv value
}

// checker walks one check, keeping the most restrictive result.
type checker struct {
	p     *Policy
	nodes int
	worst Result
	done  bool // a deny was found, or a limit was hit: nothing can change the answer
}

func (p *Policy) newChecker() *checker {
	return &checker{p: p, worst: allowNothing()}
}

// record keeps r when it is more restrictive than what was found.
func (c *checker) record(r Result, cmd []word) {
	if len(r.Command) == 0 {
		r.Command = srcs(cmd)
		r.Shell = len(cmd) > 0 && cmd[0].shell
	}
	if r.worse(c.worst) || c.worst.Source == SourceNone && r.Source != SourceNone {
		c.worst = r
	}
	if c.worst.Decision == Deny {
		c.done = true
	}
}

// unknown records the unknown decision for cmd, saying why.
func (c *checker) unknown(cmd []word, why string) {
	c.record(Result{Decision: c.p.unknown, Source: SourceUnknown, RuleIndex: -1, Why: why}, cmd)
}

// limit records the unknown decision because a limit was hit, and stops
// the check: what is left is not looked at.
func (c *checker) limit(cmd []word, why string) {
	c.unknown(cmd, why)
	c.done = true
}

func srcs(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.src
	}
	return out
}

// script parses src and checks every command in it. nest counts the
// scripts this one is inside of.
func (c *checker) script(src string, nest int) {
	if c.done {
		return
	}
	show := []word{{src: src, shell: true}}
	switch {
	case nest > c.p.limits.MaxNest:
		c.limit(show, fmt.Sprintf("scripts nested more than %d deep", c.p.limits.MaxNest))
		return
	case len(src) > c.p.limits.MaxScriptBytes:
		c.limit(show, fmt.Sprintf("a script of %d bytes, over the %d bytes checked", len(src), c.p.limits.MaxScriptBytes))
		return
	case strings.IndexByte(src, 0) >= 0:
		c.limit(show, "a script with a NUL byte")
		return
	case !utf8.ValidString(src):
		c.limit(show, "a script that is not valid UTF-8")
		return
	}
	d, tokens := shape(src)
	if d > c.p.limits.MaxDepth {
		c.limit(show, fmt.Sprintf("a script nested %d deep, over the %d checked", d, c.p.limits.MaxDepth))
		return
	}
	if tokens > c.p.limits.MaxTokens {
		c.limit(show, fmt.Sprintf("a script of over %d tokens", c.p.limits.MaxTokens))
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		c.unknown(show, "the script does not parse: "+err.Error())
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if c.done {
			return false
		}
		c.nodes++
		if c.nodes > c.p.limits.MaxNodes {
			c.limit(show, fmt.Sprintf("a script of over %d syntax nodes", c.p.limits.MaxNodes))
			return false
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			c.assigns(n.Assigns, src)
			if len(n.Args) > 0 {
				ws := make([]word, len(n.Args))
				for i, a := range n.Args {
					ws[i] = wordOf(a, src)
				}
				c.command(ws, nest)
			}
		case *syntax.DeclClause:
			// declare/export/local/readonly/typeset: a builtin; its
			// assignments may set what the shell runs later (PATH).
			ws := []word{{val: n.Variant.Value, src: n.Variant.Value, static: true, shell: true}}
			for _, a := range n.Args {
				if a.Naked && a.Name == nil && a.Value != nil {
					ws = append(ws, wordOf(a.Value, src))
				} else {
					ws = append(ws, word{src: srcOf(a, src), shell: true})
				}
			}
			c.record(c.p.decide(n.Variant.Value, ws[1:]), ws)
			c.assigns(n.Args, src)
		case *syntax.FuncDecl:
			// Its body is walked as any other code: a function named ls
			// that calls rm is rm's to decide, and a call of a function
			// named rm is rm's too (by name).
		case *syntax.ParamExp:
			// ${x@P} expands x's value as a prompt string, command
			// substitutions included: code from data, like eval "$x".
			if e := n.Exp; e != nil && e.Op == syntax.OtherParamOps && (e.Word == nil || e.Word.Lit() == "" || strings.Contains(e.Word.Lit(), "P")) {
				c.unknown([]word{{src: srcOf(n, src), shell: true}}, "${x@P} runs the command substitutions in a value, which is not known until it runs")
			}
		case *syntax.SglQuoted:
			if !n.Dollar {
				c.subscriptCode(n.Value, nest)
			}
		case *syntax.Lit:
			c.subscriptCode(unescape(n.Value, false), nest)
		}
		return true
	})
}

// subscriptCode checks the command substitutions in a string the script
// holds as data that bash may still run: arithmetic ($((x)), ((x)), let,
// [[ $x -eq 0 ]], declare -i) evaluates a variable's value as an
// expression, and runs a $(...) or `...` in an array subscript in it,
// so x='a[$(rm y)]'; echo $((x)) runs rm. A string holding a subscript
// with one is checked as if it ran (a value read at run time, read x <
// file, cannot be: the docs say so).
func (c *checker) subscriptCode(v string, nest int) {
	i := strings.IndexByte(v, '[')
	if i < 0 || !strings.Contains(v[i:], "$(") && !strings.Contains(v[i:], "`") {
		return
	}
	c.expandedCode(v, nest, "a string holds an array subscript with a command substitution, which arithmetic would run, and does not parse")
}

// expandedCode checks the command substitutions in v, a string bash will
// expand at run time (a subscript arithmetic evaluates, compgen -W's
// word list); v that does not parse is unknown, saying why.
func (c *checker) expandedCode(v string, nest int, why string) {
	if !strings.Contains(v, "$(") && !strings.Contains(v, "`") && !strings.Contains(v, "<(") && !strings.Contains(v, ">(") {
		return
	}
	show := []word{{src: v, shell: true}}
	if nest+1 > c.p.limits.MaxNest {
		c.limit(show, fmt.Sprintf("scripts nested more than %d deep", c.p.limits.MaxNest))
		return
	}
	const pre = ": " // v as an argument: the subscript's syntax is a glob's
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(pre+v), "")
	if err != nil {
		c.unknown(show, why)
		return
	}
	var inner []string
	syntax.Walk(f, func(n syntax.Node) bool {
		if ps, ok := n.(*syntax.ProcSubst); ok {
			from, to := int(ps.OpPos.Offset())-len(pre)+2, int(ps.Rparen.Offset())-len(pre)
			if 0 <= from && from <= to && to <= len(v) {
				inner = append(inner, v[from:to])
			}
			return false
		}
		if cs, ok := n.(*syntax.CmdSubst); ok {
			from := int(cs.Left.Offset()) - len(pre) + 2 // $(
			if cs.Backquotes {
				from--
			}
			if to := int(cs.Right.Offset()) - len(pre); 0 <= from && from <= to && to <= len(v) {
				inner = append(inner, v[from:to])
			}
			return false // the inner script is checked whole below
		}
		return true
	})
	for _, s := range inner {
		c.script(s, nest+1)
	}
}

// sensitiveVars run code or choose what runs when set: a script that
// sets one cannot be judged by its command names.
var sensitiveVars = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "PS4": true, "PROMPT_COMMAND": true,
	"BASH_LOADABLES_PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
	"SHELLOPTS": true, "BASHOPTS": true, "BASH_ALIASES": true, "BASH_CMDS": true,
}

// sensitiveVar reports whether setting name can choose or run commands
// (BASH_FUNC_f%% in the environment defines a function f in bash).
func sensitiveVar(name string) bool {
	return sensitiveVars[name] || strings.HasPrefix(name, "BASH_FUNC_")
}

func (c *checker) assigns(as []*syntax.Assign, src string) {
	for _, a := range as {
		if a.Name != nil && sensitiveVar(a.Name.Value) {
			c.unknown([]word{{src: srcOf(a, src), shell: true}}, "it sets "+a.Name.Value+", which chooses or runs commands")
		}
	}
}

// command checks one simple command, as words.
func (c *checker) command(ws []word, nest int) {
	if c.done || len(ws) == 0 {
		return
	}
	if nest > c.p.limits.MaxNest {
		c.limit(ws, fmt.Sprintf("commands nested more than %d deep", c.p.limits.MaxNest))
		return
	}
	name := ws[0]
	if !name.static {
		c.unknown(ws, "the command name is not known until it runs")
		return
	}
	if name.val == "" {
		c.unknown(ws, "an empty command name")
		return
	}
	if name.val[0] == '=' {
		c.unknown(ws, "zsh runs =NAME as the file NAME is on PATH")
		return
	}
	base := baseName(name.val)
	r := c.p.decide(base, ws[1:])
	if !(r.Source == SourceDefault && shells[base] && shellWithC(ws[1:])) {
		// A shell with -c SCRIPT is decided by its script (below), and
		// by a rule that names the shell, not by the default.
		c.record(r, ws)
	}
	if base != name.val && !systemPath(name.val) {
		// A path runs whatever file is there (a script in the
		// workspace named ls): its rule applies, and unknown too.
		c.unknown(ws, "it runs a file by its path")
	}
	if base != name.val && (base == "." || base == "/") {
		return // a directory
	}
	c.follow(base, ws, nest)
}

// systemDirs hold the system's commands: /usr/bin/ls is ls.
var systemDirs = []string{"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/"}

// systemPath reports whether p names a command in a system directory
// (and nothing below it: no "..", no subdirectory).
func systemPath(p string) bool {
	for _, d := range systemDirs {
		if rest, ok := strings.CutPrefix(p, d); ok && rest != "" && !strings.Contains(rest, "/") && rest != ".." && rest != "." {
			return true
		}
	}
	return false
}

// shape counts, without parsing, how deep brackets and compound
// commands nest in src and how many tokens it has: the parser and the
// walk recurse on the one and allocate for the other, so a hostile
// script is refused before either runs. Brackets and keywords in quotes
// or comments count too, which only makes such a script unknown sooner.
func shape(src string) (depth, tokens int) {
	kw, br := 0, 0 // keywords and brackets open (a case item's ')' closes no bracket)
	inWord := false
	wordStart := 0
	endWord := func(i int) {
		if !inWord {
			return
		}
		inWord = false
		switch src[wordStart:i] {
		case "if", "while", "until", "case", "for", "select", "function", "coproc":
			kw++
		case "fi", "done", "esac":
			kw = max(kw-1, 0)
		}
		depth = max(depth, kw+br)
	}
	for i := 0; i < len(src); i++ {
		switch ch := src[i]; ch {
		case '(', '{', '[', ')', '}', ']', ' ', '\t', '\n', ';', '&', '|', '<', '>', '!', '`', '$', '"', '\'', '+', '-', '*', '/', '%', ',', '=':
			endWord(i)
			tokens++
			switch ch {
			case '(', '{', '[':
				br++
				depth = max(depth, kw+br)
			case ')', '}', ']':
				br = max(br-1, 0)
			}
		default:
			if !inWord {
				inWord, wordStart = true, i
				tokens++
			}
		}
	}
	endWord(len(src))
	return depth, tokens
}

// srcOf is n as written in src.
func srcOf(n syntax.Node, src string) string {
	s, e := n.Pos().Offset(), n.End().Offset()
	if s <= e && e <= uint(len(src)) {
		return src[s:e]
	}
	return "?"
}

// wordOf is w as far as it is known statically.
func wordOf(w *syntax.Word, src string) word {
	out := word{src: srcOf(w, src), static: true, shell: true}
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if hasGlob(v) {
				out.static, out.multi = false, true
			}
			b.WriteString(unescape(v, false))
		case *syntax.SglQuoted:
			if p.Dollar { // $'...': escapes we do not decode
				out.static = false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				out.static = false
			}
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescape(l.Value, true))
				} else {
					out.static = false // an expansion in quotes: one word, value unknown
				}
			}
		default: // $x ${x} $(...) `...` $((...)) <(...) extglob, brace: unquoted, it splits
			out.static, out.multi = false, true
		}
	}
	if out.static && strings.HasPrefix(b.String(), "~") {
		out.static = false // tilde expansion
	}
	if out.static {
		out.val = b.String()
	}
	return out
}

// hasGlob reports whether an unquoted literal may expand: a glob (*, ?,
// [...]) or a brace expansion ({a,b}, {1..3}).
func hasGlob(v string) bool {
	if strings.ContainsAny(v, "*?") {
		return true
	}
	if i := strings.IndexByte(v, '['); i >= 0 && strings.IndexByte(v[i+1:], ']') >= 0 {
		return true
	}
	if i := strings.IndexByte(v, '{'); i >= 0 {
		if j := strings.IndexByte(v[i+1:], '}'); j >= 0 {
			in := v[i+1 : i+1+j]
			return strings.Contains(in, ",") || strings.Contains(in, "..")
		}
	}
	return false
}

// unescape removes the shell's backslashes from a literal: outside
// quotes a backslash quotes the next byte; inside double quotes only
// before $ ` " \ and newline. A backslash-newline is removed.
func unescape(v string, dq bool) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		n := v[i+1]
		switch {
		case n == '\n':
			i++
		case !dq || strings.IndexByte("$`\"\\", n) >= 0:
			b.WriteByte(n)
			i++
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}
