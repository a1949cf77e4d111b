package cmdpolicy

import (
	"fmt"
	"strings"
)

// shells are the shells whose -c SCRIPT is parsed and checked (as bash,
// a superset of POSIX sh for this purpose).
var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "ksh": true,
	"mksh": true, "lksh": true, "posh": true, "yash": true, "rbash": true,
}

// otherShells run a language the parser does not read: any use is unknown.
var otherShells = map[string]bool{"fish": true, "csh": true, "tcsh": true, "nu": true, "elvish": true, "xonsh": true}

// A wrapper is a command that runs another command given as its
// arguments: env, timeout, xargs, sudo, .... Its own options are skipped
// by these lists; an option not listed makes the command unknown (it may
// take a value that would otherwise be read as the command).
type wrapper struct {
	noArg, withArg         string   // short options: without a value, with one
	longNoArg, longWithArg []string // long options (--x=v is always one word)
	positional             int      // words between the options and the command (timeout's DURATION)
	assigns                bool     // NAME=VALUE words before the command (env)
	appends                bool     // the command gets more words at run time (xargs)
	noRun                  string   // short options after which nothing is run (command -v)
	emptyUnknown           bool     // with no command it starts a shell (sudo -s, chroot)
}

var wrappers = map[string]wrapper{
	"env": {noArg: "i0v", withArg: "uC", longNoArg: []string{"--ignore-environment", "--null", "--debug"},
		longWithArg: []string{"--unset", "--chdir"}, assigns: true},
	"command": {noArg: "p", noRun: "vV"},
	"builtin": {},
	"exec":    {noArg: "cl", withArg: "a"},
	"nohup":   {},
	"setsid":  {noArg: "cfw", longNoArg: []string{"--ctty", "--fork", "--wait"}},
	"timeout": {noArg: "v", withArg: "sk", longNoArg: []string{"--preserve-status", "--foreground", "--verbose"},
		longWithArg: []string{"--signal", "--kill-after"}, positional: 1},
	"nice":    {withArg: "n", longWithArg: []string{"--adjustment"}},
	"ionice":  {noArg: "t", withArg: "cnp", longWithArg: []string{"--class", "--classdata"}},
	"stdbuf":  {withArg: "ioe", longWithArg: []string{"--input", "--output", "--error"}},
	"chrt":    {noArg: "abfiormRev", positional: 1},
	"taskset": {noArg: "ac", positional: 1},
	"time": {noArg: "pvaq", withArg: "fo", longNoArg: []string{"--portability", "--verbose", "--append", "--quiet"},
		longWithArg: []string{"--format", "--output"}},
	"xargs": {noArg: "0prtx", withArg: "aEdIiLlnPs", longNoArg: []string{"--null", "--interactive", "--no-run-if-empty", "--verbose", "--exit"},
		longWithArg: []string{"--arg-file", "--eof", "--delimiter", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars"}, appends: true},
	"sudo": {noArg: "AbEHiKklnPSsV", withArg: "CDghprtTUu", longNoArg: []string{"--askpass", "--background", "--preserve-env",
		"--set-home", "--login", "--non-interactive", "--preserve-groups", "--stdin", "--shell"},
		longWithArg:  []string{"--close-from", "--chdir", "--group", "--host", "--prompt", "--role", "--type", "--command-timeout", "--other-user", "--user"},
		emptyUnknown: true},
	"doas":     {noArg: "ns", withArg: "uC", emptyUnknown: true},
	"chroot":   {longNoArg: []string{"--skip-chdir"}, longWithArg: []string{"--userspec", "--groups"}, positional: 1, emptyUnknown: true},
	"strace":   {noArg: "cCdDfFhiqrtTvVwxyzZk", withArg: "abeEIoOpPsSuUX"},
	"ltrace":   {noArg: "bcCfhiLrStTV", withArg: "aAeEFlnopsuwx"},
	"pkexec":   {withArg: "u", longNoArg: []string{"--disable-internal-agent", "--keep-cwd"}, longWithArg: []string{"--user"}, emptyUnknown: true},
	"unbuffer": {noArg: "p"},
	"parallel": {noArg: "0kquvX", withArg: "jdEINn", longNoArg: []string{"--null", "--keep-order", "--quote", "--ungroup", "--verbose", "--xargs"},
		longWithArg: []string{"--jobs", "--delimiter", "--eof", "--max-args", "--max-replace-args"}, appends: true},
	"flock": {noArg: "sxnuoFe", withArg: "wE", longNoArg: []string{"--shared", "--exclusive", "--nonblock", "--unlock", "--close", "--no-fork"},
		longWithArg: []string{"--timeout", "--conflict-exit-code"}, positional: 1},
	"unshare": {noArg: "mUinpuCTrfc", longNoArg: []string{"--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--time", "--fork", "--map-root-user", "--map-current-user", "--kill-child"}, emptyUnknown: true},
}

// follow checks what the command ws runs besides itself: a shell's
// script, a wrapper's command, an eval's string.
func (c *checker) follow(base string, ws []word, nest int) {
	args := ws[1:]
	switch {
	case shells[base]:
		c.shell(ws, nest)
	case otherShells[base]:
		c.unknown(ws, base+" runs a language that is not checked")
	case base == "busybox" || base == "toybox":
		if len(args) > 0 && args[0].static && strings.HasPrefix(args[0].val, "-") {
			c.unknown(ws, base+" with an option")
		} else if len(args) > 0 {
			c.command(args, nest+1)
		}
	case base == "eval":
		c.words(ws, args, nest)
	case base == "." || base == "source":
		c.unknown(ws, "it runs a script file")
	case base == "alias":
		// An alias is code that runs where its name is used: check it.
		for _, a := range args {
			if !a.static {
				c.unknown(ws, "an alias not known until it runs")
			} else if i := strings.IndexByte(a.val, '='); i > 0 {
				c.script(a.val[i+1:], nest+1)
			}
		}
	case base == "trap":
		rest, ok := skipOptions(args, wrapper{noArg: "lp"})
		if !ok {
			c.unknown(ws, "trap with an option not known")
		} else if len(rest) > 0 {
			c.words(ws, rest[:1], nest)
		}
	case base == "enable" || base == "hash":
		for _, a := range args {
			if !a.static || strings.HasPrefix(a.val, "-") && strings.ContainsAny(a.val, "fp") {
				c.unknown(ws, base+" can make a name run another file")
			}
		}
	case base == "su" || base == "runuser" || base == "script" || base == "sg":
		// Each runs -c SCRIPT (--command) with a shell, or a shell
		// (sg: its other argument) when there is none.
		c.su(ws, nest)
	case base == "watch":
		rest, ok := skipOptions(args, wrapper{noArg: "bceghtprx", withArg: "nq", longNoArg: []string{"--beep", "--color", "--errexit", "--exec", "--no-title", "--precise", "--chgexit"}, longWithArg: []string{"--interval", "--differences"}})
		if !ok {
			c.unknown(ws, "watch with an option not known")
		} else if len(rest) > 0 {
			c.words(ws, rest, nest)
		}
	case base == "find":
		c.find(ws, nest)
	case base == "mapfile" || base == "readarray":
		c.mapfile(ws, nest)
	case base == "compgen":
		c.compgen(ws, nest)
	default:
		w, ok := wrappers[base]
		if !ok {
			return
		}
		c.wrapped(ws, w, nest)
	}
}

// words checks static words joined by spaces as a script (eval, trap,
// watch); a word not known statically makes it unknown.
func (c *checker) words(ws, script []word, nest int) {
	parts := make([]string, len(script))
	for i, w := range script {
		if !w.static {
			c.unknown(ws, "a script not known until it runs")
			return
		}
		parts[i] = w.val
	}
	c.script(strings.Join(parts, " "), nest+1)
}

// wrapped checks the command a wrapper runs.
func (c *checker) wrapped(ws []word, w wrapper, nest int) {
	base := baseName(ws[0].val)
	args := ws[1:]
	for _, a := range args {
		if !a.static {
			break
		}
		if a.val == "--" {
			break
		}
		if len(a.val) > 1 && a.val[0] == '-' && a.val[1] != '-' && strings.ContainsAny(a.val[1:], w.noRun) && w.noRun != "" {
			return // command -v NAME: looks NAME up, runs nothing
		}
		if len(a.val) == 0 || a.val[0] != '-' {
			break
		}
	}
	rest, ok := skipOptions(args, w)
	if !ok {
		c.unknown(ws, base+" with an option that is not known")
		return
	}
	if w.assigns {
		for len(rest) > 0 && rest[0].static && strings.Contains(rest[0].val, "=") && !strings.HasPrefix(rest[0].val, "=") {
			if name, _, _ := strings.Cut(rest[0].val, "="); sensitiveVar(name) {
				c.unknown(ws, "it sets "+ShowCommand([]string{name})+", which chooses or runs commands")
			}
			rest = rest[1:]
		}
	}
	for range w.positional {
		if len(rest) == 0 {
			break
		}
		if !rest[0].static && rest[0].multi {
			c.unknown(ws, "the command "+base+" runs is not known until it runs")
			return
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		if w.emptyUnknown {
			c.unknown(ws, base+" with no command starts a shell")
		}
		return
	}
	if rest[0].static && strings.HasPrefix(rest[0].val, "-") {
		c.unknown(ws, base+" with an option where its command should be")
		return
	}
	target := append([]word(nil), rest...)
	if w.appends {
		target = append(target, word{src: "…", multi: true, shell: rest[0].shell})
	}
	c.command(target, nest+1)
}

// skipOptions skips the options of w at the start of args; ok is false
// for an option w does not list or a word not known statically where an
// option may be.
func skipOptions(args []word, w wrapper) (rest []word, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			if a.multi {
				return nil, false // may be options, or the command
			}
			return args[i:], true
		}
		v := a.val
		switch {
		case v == "--":
			return args[i+1:], true
		case strings.HasPrefix(v, "--"):
			name, _, hasVal := strings.Cut(v, "=")
			switch {
			case contains(w.longNoArg, name):
			case contains(w.longWithArg, name):
				if !hasVal {
					i++
				}
			default:
				return nil, false
			}
		case len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				ch := v[j]
				switch {
				case strings.IndexByte(w.noArg, ch) >= 0, strings.IndexByte(w.noRun, ch) >= 0:
				case strings.IndexByte(w.withArg, ch) >= 0:
					if j == len(v)-1 {
						i++ // the value is the next word
					}
					j = len(v)
				default:
					return nil, false
				}
			}
		default:
			return args[i:], true
		}
	}
	return nil, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shell checks a shell's argv: with -c, its script; with a file or
// from its input, unknown.
func (c *checker) shell(ws []word, nest int) {
	args := ws[1:]
	sawC := false
	i := 0
opts:
	for ; i < len(args); i++ {
		a := args[i]
		if !a.static {
			if a.multi || !sawC {
				c.unknown(ws, "a shell option or script not known until it runs")
				return
			}
			break
		}
		v := a.val
		switch {
		case v == "--" || v == "-":
			i++
			break opts
		case strings.HasPrefix(v, "--"):
			switch v {
			case "--norc", "--noprofile", "--login", "--posix", "--restricted", "--verbose", "--noediting", "--version", "--help":
			case "--rcfile", "--init-file":
				i++
			default:
				c.unknown(ws, fmt.Sprintf("a shell option %s that is not known", ShowCommand([]string{v})))
				return
			}
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'c':
					sawC = true
				case 'o', 'O':
					i++ // its value is the next word
				case 's', 'i':
					c.unknown(ws, "the shell reads its commands from its input")
					return
				}
			}
		default:
			break opts
		}
	}
	rest := args[min(i, len(args)):]
	switch {
	case sawC && len(rest) == 0:
		return // sh -c with no script: an error, nothing runs
	case sawC && !rest[0].static:
		c.unknown(ws, "a shell script not known until it runs")
	case sawC:
		c.script(rest[0].val, nest+1)
	case len(rest) > 0:
		c.unknown(ws, "it runs a script file")
	default:
		c.unknown(ws, "the shell reads its commands from its input")
	}
}

// shellWithC reports whether a shell's arguments start with options
// that hold -c.
func shellWithC(args []word) bool {
	for _, a := range args {
		if !a.static || len(a.val) < 2 || a.val[0] != '-' && a.val[0] != '+' || a.val == "--" {
			return false
		}
		if a.val[1] != '-' && strings.IndexByte(a.val, 'c') > 0 {
			return true
		}
	}
	return false
}

// su checks su/runuser (and script, sg): -c SCRIPT is checked; without
// it, a shell starts.
func (c *checker) su(ws []word, nest int) {
	args := ws[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			c.unknown(ws, "an argument not known until it runs")
			return
		}
		switch {
		case a.val == "-c" || a.val == "--command":
			if i+1 < len(args) {
				c.words(ws, args[i+1:i+2], nest)
			}
			return
		case strings.HasPrefix(a.val, "--command="):
			c.script(strings.TrimPrefix(a.val, "--command="), nest+1)
			return
		}
	}
	c.unknown(ws, ws[0].src+" without -c starts a shell")
}

// find checks the commands of -exec, -execdir, -ok and -okdir.
func (c *checker) find(ws []word, nest int) {
	args := ws[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			if a.multi {
				c.unknown(ws, "find with an expression not known until it runs")
				return
			}
			continue
		}
		switch a.val {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		var target []word
		j := i + 1
		for ; j < len(args); j++ {
			v := args[j]
			if v.static && (v.val == ";" || v.val == "+") {
				break
			}
			if v.static && strings.Contains(v.val, "{}") {
				v = word{src: v.src, shell: v.shell} // the file name, at run time
			}
			target = append(target, v)
		}
		if len(target) > 0 {
			c.command(target, nest+1)
		}
		i = j
	}
}

// mapfile checks mapfile/readarray's -C CALLBACK, which bash evaluates
// (with the index and the line appended) every -c lines: a script.
func (c *checker) mapfile(ws []word, nest int) {
	c.optValues(ws, "dnOsucC", "a mapfile callback", func(o byte, v word) {
		if o == 'C' {
			c.words(ws, []word{v}, nest)
		}
	})
}

// compgen checks what compgen runs: -C COMMAND (a script, the word
// appended) and the command substitutions in -W WORDLIST, which it
// expands. (-F names a function, whose body is checked where it is
// defined; complete only runs these at an interactive prompt.)
func (c *checker) compgen(ws []word, nest int) {
	c.optValues(ws, "oAGWFCXPS", "a compgen value", func(o byte, v word) {
		switch o {
		case 'C':
			c.words(ws, []word{{val: v.val, src: v.val, static: true}}, nest)
		case 'W':
			c.expandedCode(v.val, nest, "compgen -W's word list does not parse")
		}
	})
}

// optValues walks the short options of ws[1:] as getopt does, up to "--"
// or the first operand, and calls fn for each option in withValue with
// its value: the rest of its word, else the next argument (that word
// itself). An argument not known statically is unknown (what names a
// value that is not), and ends the walk.
func (c *checker) optValues(ws []word, withValue, what string, fn func(o byte, v word)) {
	args := ws[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			c.unknown(ws, "an argument not known until it runs")
			return
		}
		if a.val == "--" || len(a.val) < 2 || a.val[0] != '-' {
			return // an operand: no options after it
		}
		for j := 1; j < len(a.val); j++ {
			o := a.val[j]
			if !strings.ContainsRune(withValue, rune(o)) {
				continue // a flag without a value
			}
			v := word{val: a.val[j+1:], src: a.val[j+1:], static: true}
			if v.val == "" && i+1 < len(args) {
				i++
				if !args[i].static {
					c.unknown(ws, what+" not known until it runs")
					return
				}
				v = args[i]
			}
			fn(o, v)
			break
		}
	}
}
