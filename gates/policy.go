package gates

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// ArgRule is one positional argument a command gate accepts.
type ArgRule struct {
	// Name names the argument in usage text ("REV", "PATH"); empty gives ARGn.
	Name string
	// Pattern is an RE2 expression the argument must match in full.
	Pattern string
	// Optional lets the caller leave the argument out. Only the last
	// rules may be optional.
	Optional bool
	// Variadic lets the last rule take several arguments, at most Max
	// (Max is required: 1 to 4096).
	Variadic bool
	Max      int
}

// OptionRule is one option a command gate accepts, by exact name.
type OptionRule struct {
	// Name is the option as written: "-n", "--max-count", "--oneline".
	Name string
	// Value, when set, makes the option take a value that must fully match
	// this RE2 expression; "--opt=value" and "--opt value" (and "-n value"
	// for a short option) are both accepted and checked. Empty: a flag.
	Value string
}

// EndOfOptionsNone in [CommandSpec.EndOfOptions] says the command has no
// end-of-options marker: a positional argument starting with "-" is then
// always refused.
const EndOfOptionsNone = "none"

// argPolicy checks every argument the sandbox passes to a command gate and
// rebuilds the argv tail: allowed options first (long ones as
// "--opt=value"), then the end-of-options marker, then the positionals.
type argPolicy struct {
	gate    string
	args    []argRule
	options map[string]optionRule
	eoo     string // "" when the gate takes no positionals
	legacy  bool   // allow_args / allow_pattern: every argument checked alone
	allow   []string
	re      *regexp.Regexp
}

type argRule struct {
	ArgRule
	re *regexp.Regexp
}

type optionRule struct {
	OptionRule
	re *regexp.Regexp
}

func anchored(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}

// newArgPolicy validates the rules of s. fail names the field at fault.
func newArgPolicy(s CommandSpec, fail func(field, format string, a ...any) error) (*argPolicy, error) {
	p := &argPolicy{gate: s.Name, options: map[string]optionRule{}}
	legacy := len(s.AllowArgs) > 0 || s.AllowPattern != ""
	if legacy && (len(s.Args) > 0 || len(s.Options) > 0) {
		return nil, fail("allow_args", "allow_args/allow_pattern cannot be combined with args/options; use args and options")
	}
	if legacy {
		p.legacy = true
		for i, a := range s.AllowArgs {
			if a == "" || strings.IndexByte(a, 0) >= 0 {
				return nil, fail("allow_args", "element %d is empty or contains a NUL byte", i)
			}
		}
		p.allow = slices.Clone(s.AllowArgs)
		if s.AllowPattern != "" {
			re, err := anchored(s.AllowPattern)
			if err != nil {
				return nil, fail("allow_pattern", "%v", err)
			}
			p.re = re
		}
		if s.EndOfOptions != "" {
			return nil, fail("end_of_options", "needs args: rules (allow_args/allow_pattern pass arguments as they are)")
		}
		return p, nil
	}
	optionalSeen := false
	for i, r := range s.Args {
		field := fmt.Sprintf("args[%d]", i)
		if r.Pattern == "" {
			return nil, fail(field+".pattern", "required (an RE2 expression the argument must match in full)")
		}
		re, err := anchored(r.Pattern)
		if err != nil {
			return nil, fail(field+".pattern", "%v", err)
		}
		if r.Variadic {
			if i != len(s.Args)-1 {
				return nil, fail(field+".variadic", "only the last argument rule may be variadic")
			}
			if r.Max < 1 || r.Max > 4096 {
				return nil, fail(field+".max", "a variadic argument needs max between 1 and 4096, got %d", r.Max)
			}
		} else if r.Max != 0 {
			return nil, fail(field+".max", "only a variadic argument takes max")
		}
		if r.Optional {
			optionalSeen = true
		} else if optionalSeen {
			return nil, fail(field+".optional", "a required argument cannot follow an optional one")
		}
		if r.Name == "" {
			r.Name = fmt.Sprintf("ARG%d", i+1)
		}
		p.args = append(p.args, argRule{r, re})
	}
	for i, o := range s.Options {
		field := fmt.Sprintf("options[%d]", i)
		if !validOptionName(o.Name) {
			return nil, fail(field+".name", "want an option such as -n or --max-count, got %s", quoteArg(o.Name))
		}
		if _, dup := p.options[o.Name]; dup {
			return nil, fail(field+".name", "%s listed twice", o.Name)
		}
		r := optionRule{OptionRule: o}
		if o.Value != "" {
			re, err := anchored(o.Value)
			if err != nil {
				return nil, fail(field+".value", "%v", err)
			}
			r.re = re
		}
		p.options[o.Name] = r
	}
	switch {
	case len(p.args) == 0 && s.EndOfOptions != "":
		return nil, fail("end_of_options", "the gate takes no positional arguments (no args: rules)")
	case len(p.args) > 0 && s.EndOfOptions == "":
		return nil, fail("end_of_options", `required when args: is set: the marker the command takes before positional arguments ("--", or "--end-of-options" for git), or "none" if it has none`)
	case s.EndOfOptions == EndOfOptionsNone, s.EndOfOptions == "":
	case !strings.HasPrefix(s.EndOfOptions, "-"):
		return nil, fail("end_of_options", `want "--", "--end-of-options" or "none", got %s`, quoteArg(s.EndOfOptions))
	}
	p.eoo = s.EndOfOptions
	return p, nil
}

func validOptionName(n string) bool {
	switch {
	case len(n) == 2 && n[0] == '-' && n[1] != '-':
	case len(n) > 2 && strings.HasPrefix(n, "--") && n[2] != '-':
	default:
		return false
	}
	return !strings.ContainsAny(n, "= \t\n\x00")
}

func (p *argPolicy) denied(key, format string, a ...any) error {
	return Deniedf("%s: %s (policy set by gates.commands[%s].%s)", p.gate, fmt.Sprintf(format, a...), p.gate, key)
}

// check returns the argv tail to run for args, or an error naming the
// argument refused (exit 126) and the config key that refused it.
func (p *argPolicy) check(args []string) ([]string, error) {
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, Usagef("%s: argument contains a NUL byte", p.gate)
		}
	}
	if p.legacy {
		for _, a := range args {
			if !slices.Contains(p.allow, a) && (p.re == nil || !p.re.MatchString(a)) {
				return nil, p.denied("allow_args", "argument %s is not allowed; every argument must be %s", quoteArg(a), p.legacyText())
			}
		}
		return slices.Clone(args), nil
	}
	var opts, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			name, val, hasVal = strings.Cut(a, "=")
		} else if r, ok := p.options[a[:2]]; ok && r.re != nil && len(a) > 2 {
			// "-n5": a short option that takes a value, glued to it, as
			// getopt reads it. Option names are exact, and a short one is
			// two bytes, so no other option can be meant; the value is
			// checked as for "-n 5" and passed on as "-n" "5".
			name, val, hasVal = a[:2], a[2:], true
		}
		r, ok := p.options[name]
		if !ok {
			return nil, p.denied("options", "option %s is not allowed%s%s", quoteArg(name), p.optionsText(), p.bundledHint(a))
		}
		if r.re == nil {
			if hasVal {
				return nil, p.denied("options", "option %s takes no value", name)
			}
			opts = append(opts, name)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, p.denied("options", "option %s needs a value", name)
			}
			i++
			val = args[i]
		}
		if !r.re.MatchString(val) {
			hint := ""
			if v, ok := strings.CutPrefix(val, "="); ok && !strings.HasPrefix(name, "--") && r.re.MatchString(v) {
				// getopt reads "-n=5" as -n with the value "=5"
				hint = fmt.Sprintf("; write %s %s", name, v)
			}
			return nil, p.denied("options", "value %s of option %s does not match %s%s", quoteArg(val), name, r.Value, hint)
		}
		if strings.HasPrefix(name, "--") {
			opts = append(opts, name+"="+val)
		} else {
			opts = append(opts, name, val)
		}
	}
	if err := p.checkPositionals(pos); err != nil {
		return nil, err
	}
	if len(pos) > 0 && p.eoo != EndOfOptionsNone {
		opts = append(opts, p.eoo)
	}
	return append(opts, pos...), nil
}

func (p *argPolicy) checkPositionals(pos []string) error {
	if len(p.args) == 0 {
		if len(pos) > 0 {
			return p.denied("args", "takes no positional arguments, got %s", quoteArg(pos[0]))
		}
		return nil
	}
	j := 0
	for _, r := range p.args {
		n := 1
		if r.Variadic {
			n = r.Max
		}
		took := 0
		for took < n && j < len(pos) {
			a := pos[j]
			if p.eoo == EndOfOptionsNone && strings.HasPrefix(a, "-") {
				return p.denied("args", "argument %s starts with - and the command has no end-of-options marker", quoteArg(a))
			}
			if !r.re.MatchString(a) {
				return p.denied("args", "argument %s (%s) does not match %s", quoteArg(a), r.Name, r.Pattern)
			}
			took++
			j++
		}
		if took == 0 && !r.Optional {
			return p.denied("args", "missing argument %s", r.Name)
		}
	}
	if j < len(pos) {
		return p.denied("args", "too many arguments: %s is not allowed", quoteArg(pos[j]))
	}
	return nil
}

// bundledHint says how to write "-ab" when -a and -b are allowed flags
// (short options are matched by exact name, never unbundled), or "".
func (p *argPolicy) bundledHint(a string) string {
	if len(a) < 3 || a[0] != '-' || a[1] == '-' {
		return ""
	}
	var parts []string
	for _, c := range []byte(a[1:]) {
		o := "-" + string(c)
		if r, ok := p.options[o]; !ok || r.re != nil {
			return ""
		}
		parts = append(parts, o)
	}
	return "; options are not bundled: write " + strings.Join(parts, " ")
}

// allows reports whether args alone pass the policy.
func (p *argPolicy) allows(args ...string) bool {
	_, err := p.check(args)
	return err == nil
}

func (p *argPolicy) legacyText() string {
	var alts []string
	if len(p.allow) > 0 {
		alts = append(alts, "one of "+strings.Join(p.allow, ", "))
	}
	if p.re != nil {
		alts = append(alts, "matching "+p.re.String())
	}
	return strings.Join(alts, ", or ")
}

func (p *argPolicy) optionsText() string {
	if len(p.options) == 0 {
		return "; this gate takes no options"
	}
	names := slices.Sorted(maps.Keys(p.options))
	return "; allowed: " + strings.Join(names, ", ")
}

// usage renders the accepted command line, e.g. "git_log [-n N] [REV]".
func (p *argPolicy) usage() (string, []Param) {
	var b strings.Builder
	var params []Param
	if p.legacy {
		b.WriteString(" [ARGS...]")
		params = append(params, Param{Name: "ARGS", Variadic: true,
			Description: "Each argument must be " + p.legacyText() + "."})
		return b.String(), params
	}
	names := slices.Sorted(maps.Keys(p.options))
	for _, n := range names {
		r := p.options[n]
		if r.re != nil {
			fmt.Fprintf(&b, " [%s VALUE]", n)
			params = append(params, Param{Name: n, Flag: true, Description: "Option; its value must match " + r.Value + "."})
		} else {
			fmt.Fprintf(&b, " [%s]", n)
			params = append(params, Param{Name: n, Flag: true, Type: "boolean", Description: "Flag."})
		}
	}
	for _, r := range p.args {
		s := r.Name
		if r.Variadic {
			s += "..."
		}
		if r.Optional {
			s = "[" + s + "]"
		}
		b.WriteString(" " + s)
		params = append(params, Param{Name: r.Name, Required: !r.Optional, Variadic: r.Variadic,
			Description: "Must match " + r.Pattern + "."})
	}
	return b.String(), params
}

// patterns returns, for args that pass the policy, one anchored RE2
// expression per argument that the policy's own rules bound: an option
// name (and "--") as itself, an option's value as the option's pattern,
// a positional argument as its rule's pattern (legacy: allow_pattern when
// the argument matches it, else the argument itself). Nil when args do
// not pass.
func (p *argPolicy) patterns(args []string) []string {
	if _, err := p.check(args); err != nil {
		return nil
	}
	lit := regexp.QuoteMeta
	out := make([]string, 0, len(args))
	if p.legacy {
		for _, a := range args {
			if p.re != nil && p.re.MatchString(a) {
				out = append(out, p.re.String()[len(`^(?:`):len(p.re.String())-len(`)$`)])
			} else {
				out = append(out, lit(a))
			}
		}
		return out
	}
	var pos []int // indexes of the positionals in args
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, lit(a))
			for j := i + 1; j < len(args); j++ {
				pos = append(pos, j)
				out = append(out, "")
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, i)
			out = append(out, "")
			continue
		}
		name, _, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			name, _, hasVal = strings.Cut(a, "=")
		} else if r, ok := p.options[a[:2]]; ok && r.re != nil && len(a) > 2 {
			name, hasVal = a[:2], true
		}
		r := p.options[name]
		switch {
		case r.re == nil:
			out = append(out, lit(a))
		case hasVal:
			sep := ""
			if strings.HasPrefix(name, "--") {
				sep = "="
			}
			out = append(out, lit(name+sep)+"(?:"+r.Value+")")
		default:
			out = append(out, lit(name), "(?:"+r.Value+")")
			i++
		}
	}
	// the positionals, in order, by the rule that took each (as
	// checkPositionals assigns them)
	j := 0
	for _, r := range p.args {
		n := 1
		if r.Variadic {
			n = r.Max
		}
		for took := 0; took < n && j < len(pos); took++ {
			out[pos[j]] = "(?:" + r.Pattern + ")"
			j++
		}
	}
	return out
}
