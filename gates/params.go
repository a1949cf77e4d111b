package gates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Two conventions hold for the arguments of every gate, whatever its kind;
// the caller (the bridge's dispatcher) applies them before approval and
// policy see the call:
//
//   - "--help" or "-h" as the only argument asks for the gate's usage
//     ([WantsHelp], [WriteHelp]): printed on stdout, exit 0, the gate not
//     run. A gate that takes that argument itself says so ([HelpOwner]).
//   - one argument that is a JSON object whose keys are all names of the
//     gate's parameters is taken as its parameters and turned into the
//     words its usage line describes ([ParamArgs]); anything else stays a
//     plain argument.

// HelpOwner is implemented by gates that may take "--help" or "-h" as an
// argument of their own: gb_echo prints it, a command gate whose policy
// allows it passes it to the host command (whose own help it is), an MCP
// tool prints the server's description. [WantsHelp] then leaves the call
// to the gate.
type HelpOwner interface {
	OwnsHelp(arg string) bool
}

// WantsHelp reports whether args ask for g's usage: "--help" or "-h" as the
// only argument, unless g takes it itself (a [HelpOwner], or an option of
// that name among its params).
func WantsHelp(g Gate, args []string) bool {
	if len(args) != 1 || (args[0] != "--help" && args[0] != "-h") {
		return false
	}
	if h, ok := g.(HelpOwner); ok && h.OwnsHelp(args[0]) {
		return false
	}
	for _, p := range g.Spec().Params {
		if p.Flag && p.Option() == args[0] {
			return false
		}
	}
	return true
}

// WriteHelp prints g's usage for a help request: the usage line, the
// summary, each parameter with its description, and how to pass the
// parameters as JSON.
func WriteHelp(w io.Writer, g Gate) error {
	spec := g.Spec()
	var b strings.Builder
	usage := spec.Usage
	if usage == "" {
		usage = UsageOf(spec.Name, spec.Params)
	}
	fmt.Fprintf(&b, "usage: %s\n", usage)
	if spec.Summary != "" {
		fmt.Fprintf(&b, "\n%s\n", spec.Summary)
	}
	if len(spec.Params) > 0 {
		b.WriteString("\nparameters:\n")
		for _, p := range spec.Params {
			var attrs []string
			if p.Required {
				attrs = append(attrs, "required")
			}
			if o := p.Option(); o != "" {
				if p.Type == "boolean" {
					attrs = append(attrs, "flag "+o)
				} else {
					attrs = append(attrs, "option "+o+" VALUE")
				}
			}
			switch {
			case p.Variadic && spec.RawArgs:
				attrs = append(attrs, "several words")
			case p.Variadic:
				attrs = append(attrs, "several words, in JSON an array")
			case p.Type != "" && p.Type != "boolean":
				attrs = append(attrs, p.Type)
			}
			fmt.Fprintf(&b, "  %s", p.Name)
			if len(attrs) > 0 {
				fmt.Fprintf(&b, " (%s)", strings.Join(attrs, ", "))
			}
			if p.Description != "" {
				fmt.Fprintf(&b, ": %s", p.Description)
			}
			b.WriteByte('\n')
		}
		if !spec.RawArgs {
			fmt.Fprintf(&b, "\nThe parameters may also come as one JSON object argument: %s '%s'\n", spec.Name, jsonExample(spec.Params))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonExample is a JSON object of the required params (or the first one).
func jsonExample(ps []Param) string {
	var keys []Param
	for _, p := range ps {
		if p.Required {
			keys = append(keys, p)
		}
	}
	if len(keys) == 0 {
		keys = ps[:1]
	}
	var parts []string
	for _, p := range keys {
		k, _ := json.Marshal(p.Name)
		v := `"…"`
		switch {
		case p.Variadic || p.Type == "array":
			v = `["…"]`
		case p.Type == "integer" || p.Type == "number":
			v = "1"
		case p.Type == "boolean":
			v = "true"
		}
		parts = append(parts, string(k)+":"+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// ParamArgs applies the JSON convention to a call's arguments: when args
// is one JSON object (UTF-8, nothing after it) with at least one key, all
// of them names of g's params, and g does not take its arguments raw
// ([Spec.RawArgs]), it returns the words g's usage line describes:
//
//   - options first, in params order: "--NAME VALUE" (the option as
//     [Param.Option] writes it); a boolean flag alone when true, left out
//     when false; a null value is left out;
//   - then "--" when a positional value starts with "-" and g reads "--"
//     as the end of its options ([Spec.DashDash]: the built-in gates,
//     command gates with args/options rules), so it is not taken for an
//     option; other gates get the value as it is;
//   - then the positional values in params order; a variadic one takes a
//     JSON array as several words. A positional parameter cannot be left
//     out before one that is given (the words would shift): a usage error.
//
// A string is its text, a number its JSON text (2, 1.5), true and false
// "true" and "false", an object or array its compact JSON. Otherwise args
// come back unchanged, with ok false. Errors are usage errors (exit 2)
// naming the parameter.
func ParamArgs(g Gate, args []string) (words []string, ok bool, err error) {
	spec := g.Spec()
	obj, ok := paramObject(spec, args)
	if !ok {
		return args, false, nil
	}
	usage := spec.Usage
	if usage == "" {
		usage = UsageOf(spec.Name, spec.Params)
	}
	fail := func(format string, a ...any) error {
		return Usagef("%s: JSON parameters: %s (usage: %s)", spec.Name, fmt.Sprintf(format, a...), usage)
	}
	var opts, pos []string
	gap := ""
	for _, p := range spec.Params {
		raw, has := obj[p.Name]
		if has && string(raw) == "null" {
			has = false
		}
		if p.Flag {
			if !has {
				continue
			}
			if p.Type == "boolean" {
				var on bool
				if err := json.Unmarshal(raw, &on); err != nil {
					return nil, true, fail("%s is a flag: want true or false, got %s", quoteArg(p.Name), quoteArg(string(raw)))
				}
				if on {
					opts = append(opts, p.Option())
				}
				continue
			}
			v, err := jsonWord(raw)
			if err != nil {
				return nil, true, fail("%s: %v", quoteArg(p.Name), err)
			}
			opts = append(opts, p.Option(), v)
			continue
		}
		if !has {
			if gap == "" {
				gap = p.Name
			}
			continue
		}
		if gap != "" {
			return nil, true, fail("%s is given but %s before it is not: positional parameters are passed in order", quoteArg(p.Name), quoteArg(gap))
		}
		var items []json.RawMessage
		if p.Variadic && json.Unmarshal(raw, &items) == nil {
			for _, it := range items {
				v, err := jsonWord(it)
				if err != nil {
					return nil, true, fail("%s: %v", quoteArg(p.Name), err)
				}
				pos = append(pos, v)
			}
			continue
		}
		v, err := jsonWord(raw)
		if err != nil {
			return nil, true, fail("%s: %v", quoteArg(p.Name), err)
		}
		pos = append(pos, v)
	}
	for _, v := range pos {
		if spec.DashDash && strings.HasPrefix(v, "-") {
			opts = append(opts, "--")
			break
		}
	}
	words = append(opts, pos...)
	if words == nil {
		words = []string{}
	}
	return words, true, nil
}

// paramObject decodes args as a JSON object of spec's parameters, or
// reports that it is not one.
func paramObject(spec Spec, args []string) (map[string]json.RawMessage, bool) {
	if spec.RawArgs || len(spec.Params) == 0 || len(args) != 1 {
		return nil, false
	}
	a := strings.TrimLeft(args[0], " \t\r\n")
	// JSON cannot carry bytes that are not UTF-8: such an argument is
	// never read as JSON (decoding would change them to U+FFFD).
	if !strings.HasPrefix(a, "{") || !utf8.ValidString(a) {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(a))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || len(obj) == 0 {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF { // something after the object
		return nil, false
	}
	names := make(map[string]bool, len(spec.Params))
	for _, p := range spec.Params {
		names[p.Name] = true
	}
	for k := range obj {
		if !names[k] {
			return nil, false
		}
	}
	return obj, true
}

// jsonWord is the argument a JSON value stands for.
func jsonWord(raw json.RawMessage) (string, error) {
	var s string
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
	case '{', '[':
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return "", err
		}
		s = b.String()
	default: // a number, true, false: as written
		s = string(raw)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("contains a NUL byte, which no argument can hold")
	}
	return s, nil
}
