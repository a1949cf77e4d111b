package cmdpolicy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Decision is what the policy says about a command: allow it, deny it,
// or ask a person. They are ordered by how restrictive they are, so the
// larger of two is the one that wins (deny > ask > allow).
type Decision int

const (
	Allow Decision = iota
	Ask
	Deny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "Decision(" + strconv.Itoa(int(d)) + ")"
}

// MarshalText writes the decision as its word (JSON "deny").
func (d Decision) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the decision's word.
func (d *Decision) UnmarshalText(b []byte) error {
	v, err := ParseDecision(string(b))
	*d = v
	return err
}

// ParseDecision reads "allow", "ask" or "deny".
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "ask":
		return Ask, nil
	case "deny":
		return Deny, nil
	}
	return 0, fmt.Errorf("unknown decision %q: want allow, deny or ask", s)
}

// Config is the policy.commands section of the config (key names fixed
// by issue 29).
type Config struct {
	// Default decides a command no rule names; "allow" when empty.
	Default string `mapstructure:"default" yaml:"default,omitempty" json:"default,omitempty"`
	// Unknown decides what cannot be known before the script runs; "ask"
	// when empty.
	Unknown string `mapstructure:"unknown" yaml:"unknown,omitempty" json:"unknown,omitempty"`
	Rules   []Rule `mapstructure:"rules" yaml:"rules,omitempty" json:"rules,omitempty"`
}

// A Rule decides the commands named Command whose first len(Args)
// arguments match Args, position by position (RE2, anchored); later
// arguments are free.
type Rule struct {
	Command  string   `mapstructure:"command" yaml:"command" json:"command"`
	Args     []string `mapstructure:"args" yaml:"args,omitempty" json:"args,omitempty"`
	Decision string   `mapstructure:"decision" yaml:"decision" json:"decision"`
}

// String is the rule as a config line: {command: git, args: [push, ".*"], decision: ask}.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString("{command: ")
	b.WriteString(yamlScalar(r.Command))
	if len(r.Args) > 0 {
		b.WriteString(", args: [")
		for i, a := range r.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(yamlScalar(a))
		}
		b.WriteString("]")
	}
	b.WriteString(", decision: ")
	b.WriteString(r.Decision)
	b.WriteString("}")
	return b.String()
}

// yamlScalar quotes s unless it is a plain word.
func yamlScalar(s string) string {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Limits bound what checking one script may cost the host: a hostile
// script gets the unknown decision when it goes over one.
type Limits struct {
	MaxScriptBytes int // bytes of one script (each nested `sh -c` string too)
	MaxTokens      int // tokens of one script, counted before parsing (parsing allocates per token)
	MaxNodes       int // syntax nodes visited over the whole check, nested scripts included
	MaxDepth       int // nesting of brackets and compound commands in a script (the parser recurses on it)
	MaxNest        int // scripts within scripts: sh -c, eval, alias, trap, wrappers
}

// DefaultLimits are the limits New uses for zero fields.
func DefaultLimits() Limits {
	return Limits{MaxScriptBytes: 256 << 10, MaxTokens: 100_000, MaxNodes: 1_000_000, MaxDepth: 200, MaxNest: 8}
}

// Policy checks commands against a Config. A nil *Policy allows
// everything (no policy.commands: nothing changes).
type Policy struct {
	def, unknown Decision
	rules        []rule
	gates        map[string]bool
	limits       Limits
}

type rule struct {
	Rule
	index    int
	decision Decision
	args     []*regexp.Regexp
}

// An Option configures New.
type Option func(*Policy)

// WithGates names the gates: a command of that name is reported as a
// gate call (Result.Gate).
func WithGates(names ...string) Option {
	return func(p *Policy) {
		for _, n := range names {
			p.gates[n] = true
		}
	}
}

// WithLimits sets the limits; zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(p *Policy) {
		d := DefaultLimits()
		if l.MaxScriptBytes > 0 {
			d.MaxScriptBytes = l.MaxScriptBytes
		}
		if l.MaxTokens > 0 {
			d.MaxTokens = l.MaxTokens
		}
		if l.MaxNodes > 0 {
			d.MaxNodes = l.MaxNodes
		}
		if l.MaxDepth > 0 {
			d.MaxDepth = l.MaxDepth
		}
		if l.MaxNest > 0 {
			d.MaxNest = l.MaxNest
		}
		p.limits = d
	}
}

// A ConfigError is a bad policy.commands value; Key names it the way the
// config file does (policy.commands.rules[1].args[0]).
type ConfigError struct {
	Key, Msg, Help string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Msg }
func (e *ConfigError) Hint() string  { return e.Help }

// New compiles cfg.
func New(cfg Config, opts ...Option) (*Policy, error) {
	p := &Policy{def: Allow, unknown: Ask, gates: map[string]bool{}, limits: DefaultLimits()}
	const key = "policy.commands"
	var err error
	if cfg.Default != "" {
		if p.def, err = ParseDecision(cfg.Default); err != nil {
			return nil, &ConfigError{key + ".default", err.Error(), "use allow, deny or ask"}
		}
	}
	if cfg.Unknown != "" {
		if p.unknown, err = ParseDecision(cfg.Unknown); err != nil {
			return nil, &ConfigError{key + ".unknown", err.Error(), "use allow, deny or ask"}
		}
	}
	for i, r := range cfg.Rules {
		k := fmt.Sprintf("%s.rules[%d]", key, i)
		if r.Command == "" || strings.ContainsAny(r.Command, "/\x00") || strings.TrimSpace(r.Command) != r.Command {
			return nil, &ConfigError{k + ".command", fmt.Sprintf("bad command name %q", r.Command),
				"name the command as it is called, without a directory: {command: rm, decision: deny}"}
		}
		d, err := ParseDecision(r.Decision)
		if err != nil {
			return nil, &ConfigError{k + ".decision", err.Error(), "every rule needs decision: allow, deny or ask"}
		}
		cr := rule{Rule: r, index: i, decision: d}
		for j, a := range r.Args {
			re, err := regexp.Compile(`^(?:` + a + `)$`)
			if err != nil {
				return nil, &ConfigError{fmt.Sprintf("%s.args[%d]", k, j), err.Error(),
					"each argument is an RE2 pattern matched against the whole argument (https://golang.org/s/re2syntax)"}
			}
			cr.args = append(cr.args, re)
		}
		p.rules = append(p.rules, cr)
	}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// A Source says what decided a Result.
type Source string

const (
	SourceNone    Source = ""        // no policy, or nothing in the script to check
	SourceRule    Source = "rule"    // a rule (Result.RuleIndex)
	SourceDefault Source = "default" // policy.commands.default
	SourceUnknown Source = "unknown" // policy.commands.unknown: not known statically (Result.Why)
)

// Result is what the policy decided about a script or argv: the most
// restrictive decision over every command in it, and the first command
// that got it.
type Result struct {
	Decision Decision `json:"decision"`
	Source   Source   `json:"source,omitempty"`
	// RuleIndex is the rule's index in policy.commands.rules (-1 when
	// Source is not rule); Rule its text.
	RuleIndex int    `json:"rule_index"`
	Rule      string `json:"rule,omitempty"`
	// Command is the command that decided, as words (an expansion shown
	// as written, e.g. "$cmd").
	Command []string `json:"command,omitempty"`
	// Why says why the command cannot be known statically (Source unknown).
	Why string `json:"why,omitempty"`
	// Gate reports that Command names a gate.
	Gate bool `json:"gate,omitempty"`
	// Shell reports that Command is shell source, as written in a
	// script ("$f" is the expansion), not an argv's values.
	Shell bool `json:"shell,omitempty"`
}

// show is Command for a message.
func (r Result) show() string {
	if r.Shell {
		return showSource(r.Command)
	}
	return ShowCommand(r.Command)
}

// showSource is shell source words for a message: as written, but a
// word with a control character, a byte that is not UTF-8 or a backslash
// Go-quoted (so a quoted word always holds a backslash and a raw one
// never does: neither can pass for the other, or forge a line).
func showSource(words []string) string {
	return showWords(words, func(w string) bool {
		return !utf8.ValidString(w) || strings.ContainsFunc(w, func(c rune) bool {
			return c == '\\' || c != ' ' && !strconv.IsGraphic(c)
		})
	})
}

// showWords joins words by spaces for a message, at most 16 of them, each
// cut at 200 bytes (the cut said) and Go-quoted when quote says so.
func showWords(words []string, quote func(string) bool) string {
	const maxWords, maxWord = 16, 200
	var b strings.Builder
	for i, w := range words {
		if i == maxWords {
			fmt.Fprintf(&b, " …(%d more words)", len(words)-maxWords)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		cut := ""
		if len(w) > maxWord {
			cut = fmt.Sprintf("…(%d bytes)", len(w))
			w = w[:maxWord]
		}
		if quote(w) {
			w = strconv.Quote(w)
		}
		b.WriteString(w)
		b.WriteString(cut)
	}
	return b.String()
}

func allowNothing() Result { return Result{Decision: Allow, RuleIndex: -1} }

// By says in words what decided: `rule 2 {command: rm, decision: deny}`,
// `policy.commands.default`, `policy.commands.unknown (the command name is an expansion)`.
func (r Result) By() string {
	switch r.Source {
	case SourceRule:
		return fmt.Sprintf("rule %d %s", r.RuleIndex, r.Rule)
	case SourceDefault:
		return "policy.commands.default"
	case SourceUnknown:
		// Why may quote the script (a parse error, a name it sets):
		// shown on the approval prompt, it must not hold a control
		// character that redraws the question.
		why := r.Why
		if !utf8.ValidString(why) || strings.ContainsFunc(why, func(c rune) bool { return c != ' ' && !strconv.IsGraphic(c) }) {
			why = strconv.Quote(why)
		}
		return "policy.commands.unknown (" + why + ")"
	}
	return "no command policy"
}

// String says the decision in words: `deny: rm -rf x (rule 0 {command: rm, decision: deny})`.
func (r Result) String() string {
	if len(r.Command) == 0 {
		return r.Decision.String() + " (" + r.By() + ")"
	}
	what := "command"
	if r.Gate {
		what = "gate"
	}
	return fmt.Sprintf("%s: %s %s (%s)", r.Decision, what, r.show(), r.By())
}

// ShowCommand is argv for a message: words joined by spaces, each quoted
// when it holds a space, a quote or a byte that is not printable UTF-8,
// and cut when long, so a command from a sandbox cannot pass for another
// line or another word.
func ShowCommand(argv []string) string {
	return showWords(argv, func(w string) bool {
		return w == "" || strings.ContainsFunc(w, func(c rune) bool {
			return c <= ' ' || c == '"' || c == '\'' || c == '\\' || c == 0x7f || c == 0xfffd || !strconv.IsPrint(c)
		})
	})
}

// worse reports whether r is more restrictive than o.
func (r Result) worse(o Result) bool { return r.Decision > o.Decision }

// Err is nil when the decision is allow; otherwise a *DeniedError.
func (r Result) Err() error {
	if r.Decision == Allow {
		return nil
	}
	return &DeniedError{Result: r}
}

// DeniedError is a command the policy refused (deny, or ask with no one
// to ask). Its message names the command and the rule.
type DeniedError struct {
	Result Result
}

func (e *DeniedError) Error() string {
	what := "command"
	if e.Result.Gate {
		what = "gate"
	}
	verb := "denied"
	if e.Result.Decision == Ask {
		verb = "needs approval"
	}
	return fmt.Sprintf("policy: %s %s %s by %s", what, e.Result.show(), verb, e.Result.By())
}

// Hint says what to do.
func (e *DeniedError) Hint() string {
	if e.Result.Decision == Ask {
		return "this command needs a person's approval, and this front end has no one to ask; " +
			"`gatebridge policy check` shows the decision; change policy.commands in the config to allow it"
	}
	return "`gatebridge policy check -- COMMAND...` shows which rule decides; policy.commands in the config sets the rules"
}

// ErrorData is the data of a protocol error for a refused command
// (docs/jsonrpc.md "policy_denied"): kind "policy_denied" and the Result.
type ErrorData struct {
	Kind string `json:"kind"`
	Result
	Hint string `json:"hint,omitempty"`
}

// Data is the protocol error data of the refusal.
func (e *DeniedError) Data() ErrorData {
	return ErrorData{Kind: "policy_denied", Result: e.Result, Hint: e.Hint()}
}

// IsDenied reports whether err is a policy refusal and returns it.
func IsDenied(err error) (*DeniedError, bool) {
	var de *DeniedError
	ok := errors.As(err, &de)
	return de, ok
}

// decide is the decision for one static command: name (no directory)
// and its arguments. The most restrictive matching rule wins; among
// equally restrictive ones the first. No rule: the default.
func (p *Policy) decide(name string, args []word) Result {
	best := Result{Decision: -1}
	for i := range p.rules {
		r := &p.rules[i]
		if r.Command != name || !r.matches(args) {
			continue
		}
		if r.decision > best.Decision {
			best = Result{Decision: r.decision, Source: SourceRule, RuleIndex: r.index, Rule: r.String()}
		}
		if best.Decision == Deny {
			break
		}
	}
	if best.Decision < 0 {
		best = Result{Decision: p.def, Source: SourceDefault, RuleIndex: -1}
	}
	best.Gate = p.gates[name]
	return best
}

// matches reports whether args match r's patterns. A rule with N
// patterns needs at least N arguments. An argument not known statically
// (an expansion, a glob) matches every pattern of a deny or ask rule and
// none of an allow rule: the unknown is read the restrictive way. After
// a word that may expand to any number of words, positions are unknown.
func (r *rule) matches(args []word) bool {
	restrictive := r.decision != Allow
	for i, re := range r.args {
		if i >= len(args) {
			// Fewer words: unless an earlier word may have been many.
			return restrictive && anyMulti(args)
		}
		if anyMulti(args[:i]) || !args[i].static {
			if !restrictive {
				return false
			}
			continue
		}
		if !re.MatchString(args[i].val) {
			return false
		}
	}
	return true
}

func anyMulti(ws []word) bool {
	for _, w := range ws {
		if w.multi {
			return true
		}
	}
	return false
}

// CheckArgv decides an argv as the sandbox would run it (run, sandbox
// exec, process/start): for a shell with -c SCRIPT, the script; for any
// other argv, its first word (by its base name) and its arguments, with
// wrappers (env, timeout, xargs, ...) followed to their command.
func (p *Policy) CheckArgv(argv []string) Result {
	if p == nil {
		return allowNothing()
	}
	c := p.newChecker()
	ws := staticWords(argv)
	if len(ws) == 0 {
		return allowNothing()
	}
	c.command(ws, 0)
	return c.worst
}

// staticWords is argv as words known before anything runs.
func staticWords(argv []string) []word {
	ws := make([]word, len(argv))
	for i, a := range argv {
		ws[i] = word{val: a, src: a, static: true}
	}
	return ws
}

// CheckArgvEnv is [Policy.CheckArgv] for argv started with env
// (KEY=VALUE) added to its environment, as `env KEY=VALUE… argv` is
// checked: a variable that chooses or runs commands (PATH, BASH_ENV,
// LD_PRELOAD, BASH_FUNC_*: sensitiveVars) makes it unknown, since the
// command named is then not what runs.
func (p *Policy) CheckArgvEnv(argv, env []string) Result {
	if p == nil {
		return allowNothing()
	}
	c := p.newChecker()
	ws := staticWords(argv)
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); sensitiveVar(name) {
			c.unknown(append([]word{{val: kv, src: kv, static: true}}, ws...), "its environment sets "+ShowCommand([]string{name})+", which chooses or runs commands")
		}
	}
	if len(ws) > 0 {
		c.command(ws, 0)
	}
	return c.worst
}

// CheckScript decides a shell script: every simple command in it, the
// most restrictive decision wins.
func (p *Policy) CheckScript(script string) Result {
	if p == nil {
		return allowNothing()
	}
	c := p.newChecker()
	c.script(script, 0)
	return c.worst
}

// CheckGate decides a gate call at call time, with the gate's name and
// its real arguments (a script can compute a gate's name, so the check
// of the script alone is not enough). The arguments are data, not a
// command: no wrapper or shell is followed.
func (p *Policy) CheckGate(name string, args []string) Result {
	if p == nil {
		return allowNothing()
	}
	ws := make([]word, len(args))
	for i, a := range args {
		ws[i] = word{val: a, src: a, static: true}
	}
	r := p.decide(name, ws)
	r.Gate = true
	r.Command = append([]string{name}, args...)
	return r
}

// MayAsk reports whether the policy can decide ask about anything (a
// front end opens its terminal only then). A nil *Policy never asks.
func (p *Policy) MayAsk() bool {
	if p == nil {
		return false
	}
	if p.def == Ask || p.unknown == Ask {
		return true
	}
	for _, r := range p.rules {
		if r.decision == Ask {
			return true
		}
	}
	return false
}

// baseName is the command name a rule matches: argv[0] without its
// directory.
func baseName(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	return path.Base(s)
}
