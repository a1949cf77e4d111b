package gates

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gatebridge/gatebridge/internal/lossless"
)

// argSpec describes the command line of a built-in gate. The rules are the
// same for every built-in:
//
//   - "--NAME VALUE" and "--NAME=VALUE" set an option; options may come
//     before or after positional arguments, each at most once;
//   - "--" ends the options: everything after it is positional, so a path
//     that starts with "-" is written "-- -file";
//   - "-" and "" are positional; any other argument starting with "-" is an
//     unknown option (a usage error naming it);
//   - raw gates (submit, gb_echo) take every argument literally.
//
// "--help" or "-h" alone, and one JSON object of the gate's parameters,
// are turned into a help request and into these words by the caller
// (see [WantsHelp] and [ParamArgs]) before the gate parses anything.
type argSpec struct {
	gate    string
	usage   string   // for error messages
	options []string // names, without "--", of options that take a value
	min     int      // fewest positional arguments
	max     int      // most positional arguments; -1 for no limit
	raw     bool
	// ownsHelp: "--help" alone is an argument like any other (gb_echo),
	// not a request for the usage (see [HelpOwner]).
	ownsHelp bool
}

// parsedArgs is the result of [argSpec.parse].
type parsedArgs struct {
	spec *argSpec
	opts map[string]string
	pos  []string
}

// maxQuoted bounds user input echoed back in error messages.
const maxQuoted = 64

// quoteArg quotes s for an error message, shortening it when long: the
// one quoted form every string from the sandbox is shown in
// ([lossless.QuoteCap]).
func quoteArg(s string) string { return lossless.QuoteCap(s, maxQuoted) }

func (s *argSpec) usageErr(format string, a ...any) error {
	msg := s.gate + ": " + format
	if s.usage != "" {
		msg += " (usage: " + s.usage + ")"
	}
	return Usagef(msg, a...)
}

// parse splits args into options and positional arguments. Errors map to
// exit 2 and name the offending argument.
func (s *argSpec) parse(args []string) (parsedArgs, error) {
	p := parsedArgs{spec: s, opts: map[string]string{}}
	if s.raw {
		p.pos = slices.Clone(args)
	} else {
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				p.pos = append(p.pos, args[i+1:]...)
				break
			}
			if len(a) < 2 || a[0] != '-' {
				p.pos = append(p.pos, a)
				continue
			}
			if !strings.HasPrefix(a, "--") {
				return parsedArgs{}, s.usageErr("unknown option %s; put -- before a path that starts with -", quoteArg(a))
			}
			name, val, hasVal := strings.Cut(a[2:], "=")
			if !slices.Contains(s.options, name) {
				return parsedArgs{}, s.usageErr("unknown option %s", quoteArg("--"+name))
			}
			if _, dup := p.opts[name]; dup {
				return parsedArgs{}, s.usageErr("option --%s given more than once", name)
			}
			if !hasVal {
				if i+1 >= len(args) {
					return parsedArgs{}, s.usageErr("option --%s needs a value", name)
				}
				i++
				val = args[i]
			}
			p.opts[name] = val
		}
	}
	if len(p.pos) < s.min {
		return parsedArgs{}, s.usageErr("missing argument")
	}
	if s.max >= 0 && len(p.pos) > s.max {
		return parsedArgs{}, s.usageErr("too many arguments")
	}
	return p, nil
}

// count returns option name as a non-negative integer, or def when unset.
func (p parsedArgs) count(name string, def int64) (int64, error) {
	v, ok := p.opts[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, p.spec.usageErr("--%s wants a non-negative integer, got %s", name, quoteArg(v))
	}
	return n, nil
}
