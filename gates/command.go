package gates

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/fspath"
)

// DefaultMaxOutputBytes caps each output stream of a command gate when
// [CommandSpec.MaxOutputBytes] is 0.
const DefaultMaxOutputBytes = 1 << 20

// defaultCommandPath is the command's PATH when the host has none.
const defaultCommandPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// CommandSpec configures a gate that runs a host command. Field names in
// error messages are the snake_case forms (args, options, max_output_bytes, …).
//
// Every argument the sandbox passes is policy: an argument starting with
// "-" must be one of Options (and its value must match the option's
// pattern), every other argument must match its rule in Args, in order,
// and positionals are passed after EndOfOptions so the command cannot take
// them for options. Anything else is refused with exit 126. With neither
// Args nor Options the gate takes no arguments at all. See
// docs/command-gates.md for how to write a safe gate.
type CommandSpec struct {
	// Name is the gate name (see [mailbox.ValidateName]).
	Name string
	// Summary describes the gate for models; empty gives "Run `CMD` on the host."
	Summary string
	// Command is the fixed start of argv. Command[0] is resolved with
	// exec.LookPath when the gate is built.
	Command []string
	// Args are the positional arguments the gate accepts, in order.
	Args []ArgRule
	// Options are the options the gate accepts, by exact name.
	Options []OptionRule
	// EndOfOptions is the marker passed before positional arguments:
	// "--", "--end-of-options" (git), or [EndOfOptionsNone]. Required with
	// Args.
	EndOfOptions string
	// AllowArgs and AllowPattern are the older form: every argument must be
	// one of AllowArgs or fully match AllowPattern. They cannot be combined
	// with Args or Options.
	AllowArgs    []string
	AllowPattern string
	// Home is the command's HOME; empty gives a new empty directory for
	// each call, removed after it (unless Env sets HOME).
	Home string
	// Untrusted lists directories the sandbox can write (workspace,
	// writable root, session parent): a command resolved inside one is
	// refused.
	Untrusted []string
	// Dir is the working directory; empty means the host process's.
	Dir string
	// Timeout bounds one run (the bridge applies it through [Spec.Timeout],
	// and the gate applies it too); 0 means the session's gate timeout.
	Timeout time.Duration
	// MaxOutputBytes caps stdout and stderr, each; the rest is dropped and
	// a marker is written on stderr. 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// Env is the complete environment (KEY=VALUE): the host environment is
	// not inherited, except PATH, which is added when Env has none, without
	// its relative entries and those inside Untrusted. A PATH in Env with
	// such an entry is refused. A value may reference secrets
	// (${secret:NAME}, from Secrets), expanded at each call; PATH and HOME
	// may not, nor may Command, Dir or Home.
	Env []string
	// Secrets expands the references in Env; nil refuses them.
	Secrets *secrets.Store
	// Stdin forwards the wrapper's standard input to the command; without
	// it the command's stdin is /dev/null.
	Stdin bool
	// Workspace and Protected (its protected paths, relative to it) tell
	// a gate that runs on the host and works in a directory the sandbox
	// writes which git repository it may use: the workspace's .git when
	// Protected lists it, else none (see docs/security.md). The command
	// kind sets them from [Env].
	Workspace string
	Protected []string
	// Isolator, when set, runs the command in a sandbox of its own that
	// gives it what Isolate lists (and Dir and Home, read-only unless in
	// Isolate.Write); HOME is then the sandbox's private /tmp unless Home
	// or Env sets one. Nil, or Isolate.Host, runs it on the host. The
	// command kind sets it from [Env.Isolation].
	Isolator Isolator
	Isolate  IsolateSpec
}

type commandGate struct {
	spec    Spec
	secrets *secrets.Store // expands env when refs
	refs    bool
	trust   []string // the directories the sandbox can write
	name    string
	path    string   // resolved Command[0]
	argv    []string // Command as given
	policy  *argPolicy
	home    string // "" makes a private HOME per call
	dir     string
	timeout time.Duration
	maxOut  int64
	env     []string
	stdin   bool
	iso     Isolator // nil: on the host
	// On the host, working where the sandbox writes: the directory,
	// reached without links at each call, and git's pinned repository.
	hostCwd *hostCwd
	gitEnv  []string
	isoSpec IsolateSpec // with iso: what the command reaches
}

var (
	_ Gate         = (*commandGate)(nil)
	_ ArgChecker   = (*commandGate)(nil)
	_ ArgPatterner = (*commandGate)(nil)
)

// NewCommand builds a gate that runs s.Command plus the caller's
// arguments, without a shell, in its own process group. Errors name the
// field at fault.
func NewCommand(s CommandSpec) (Gate, error) {
	fail := func(field, format string, a ...any) error {
		return fmt.Errorf("gates: command gate %q: %s: %s", s.Name, field, fmt.Sprintf(format, a...))
	}
	if !commandsSupported {
		return nil, fail("command", "command gates are not supported on this platform")
	}
	if err := mailbox.ValidateName(s.Name); err != nil {
		return nil, fail("name", "%v", err)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return nil, fail("command", "empty")
	}
	for i, a := range s.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fail("command", "element %d contains a NUL byte", i)
		}
		if secrets.Mentions(a) {
			return nil, fail("command", "element %d references a secret: only env takes ${secret:NAME}", i)
		}
	}
	for field, p := range map[string]string{"dir": s.Dir, "home": s.Home} {
		if secrets.Mentions(p) {
			return nil, fail(field, "a path cannot reference a secret: only env takes ${secret:NAME}")
		}
	}
	path, err := exec.LookPath(s.Command[0])
	if err != nil {
		return nil, fail("command", "%v", err)
	}
	if path, err = TrustedCommand(path, s.Untrusted); err != nil {
		return nil, fail("command", "%v", err)
	}
	policy, err := newArgPolicy(s, fail)
	if err != nil {
		return nil, err
	}
	g := &commandGate{
		secrets: s.Secrets,
		trust:   s.Untrusted,
		name:    s.Name,
		path:    path,
		argv:    slices.Clone(s.Command),
		policy:  policy,
		home:    s.Home,
		timeout: s.Timeout,
		maxOut:  s.MaxOutputBytes,
		stdin:   s.Stdin,
	}
	if s.Home != "" && !filepath.IsAbs(s.Home) {
		return nil, fail("home", "want an absolute path, got %s", quoteArg(s.Home))
	}
	if s.Dir != "" {
		if g.dir, err = filepath.Abs(s.Dir); err != nil {
			return nil, fail("dir", "%v", err)
		}
		fi, err := os.Stat(g.dir)
		if err != nil {
			return nil, fail("dir", "%v", err)
		}
		if !fi.IsDir() {
			return nil, fail("dir", "%q is not a directory", g.dir)
		}
	}
	if s.Timeout < 0 {
		return nil, fail("timeout", "negative")
	}
	if s.MaxOutputBytes < 0 {
		return nil, fail("max_output_bytes", "negative")
	}
	if g.maxOut == 0 {
		g.maxOut = DefaultMaxOutputBytes
	}
	hasPath := false
	for i, kv := range s.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return nil, fail("env", "element %d: want KEY=VALUE, got %s", i, quoteArg(kv))
		}
		names, err := secrets.Refs(v)
		switch {
		case err != nil:
			return nil, fail("env", "element %d: %v", i, err)
		case len(names) > 0 && (k == "PATH" || k == "HOME"):
			return nil, fail("env", "%s cannot reference a secret: it is a path", k)
		case len(names) > 0 && s.Secrets == nil:
			return nil, fail("env", "element %d references secret %s, but no secrets are configured", i, names[0])
		}
		g.refs = g.refs || len(names) > 0
		if k == "PATH" {
			hasPath = true
			for _, d := range filepath.SplitList(v) {
				if why := untrustedPathDir(d, s.Untrusted); why != "" {
					return nil, fail("env", "PATH entry %s %s: the command could run a program the sandbox planted; list only absolute directories outside it", quoteArg(d), why)
				}
			}
		}
		if k == "HOME" && g.home == "" {
			g.home = kv[len("HOME="):]
		}
	}
	g.env = slices.DeleteFunc(slices.Clone(s.Env), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") })
	if !hasPath {
		g.env = append(g.env, "PATH="+commandPath(os.Getenv("PATH"), s.Untrusted))
	}
	g.spec = g.makeSpec(s)
	g.isolate(s.Isolator, s.Isolate)
	if g.hostCwd, g.gitEnv, err = untrustedCwd(g.dir, s.Untrusted, s.Workspace, s.Protected); err != nil {
		return nil, fail("dir", "%v", err)
	}
	if hasEnv(g.env, "GIT_DIR") {
		g.gitEnv = nil // the config's own choice
	}
	return g, nil
}

// isolate makes g run its command through iso under s (nothing when iso
// is nil or s.Host). A fixed HOME outside s is added to what it reads.
func (g *commandGate) isolate(iso Isolator, s IsolateSpec) {
	if iso == nil || s.Host {
		return
	}
	g.iso = iso
	g.isoSpec = IsolateSpec{Read: slices.Clone(s.Read), Write: slices.Clone(s.Write), Network: s.Network}
	if g.home != "" && !slices.ContainsFunc(append(slices.Clip(s.Read), s.Write...), func(p string) bool {
		return fspath.Within(filepath.Clean(g.home), filepath.Clean(p))
	}) {
		g.isoSpec.Read = append(g.isoSpec.Read, g.home)
	}
}

// commandPath is the host PATH without the entries a command gate must
// not search: empty and relative ones (they name the command's working
// directory, often the workspace) and those inside untrusted directories.
func commandPath(host string, untrusted []string) string {
	var keep []string
	for _, d := range filepath.SplitList(host) {
		if untrustedPathDir(d, untrusted) == "" {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		return defaultCommandPath
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// untrustedPathDir says why the PATH entry d is unsafe, or "".
func untrustedPathDir(d string, untrusted []string) string {
	if d == "" || !filepath.IsAbs(d) {
		return "is relative (it names the working directory)"
	}
	rd, err := filepath.EvalSymlinks(d)
	if err != nil {
		rd = filepath.Clean(d)
	}
	if ru := UntrustedDir(untrusted, rd, filepath.Clean(d)); ru != "" {
		return "is inside " + ru + ", which the sandbox can write"
	}
	return ""
}

// UntrustedDir returns the directory of untrusted (with its symlinks
// resolved) that holds one of paths, compared with it resolved and as
// written, or "" when none does. paths must be clean and absolute; ""
// entries of untrusted are skipped.
func UntrustedDir(untrusted []string, paths ...string) string {
	return fspath.UntrustedDir(untrusted, paths...)
}

func (g *commandGate) makeSpec(s CommandSpec) Spec {
	sp := Spec{
		Name:    g.name,
		Summary: s.Summary,
		Timeout: s.Timeout,
		Usage:   g.name,
	}
	if sp.Summary == "" {
		sp.Summary = fmt.Sprintf("Run `%s` on the host.", strings.Join(g.argv, " "))
	}
	if s.Stdin {
		sp.Stdin = StdinAlways
	}
	// The args/options policy reads the caller's "--"; allow_args and
	// allow_pattern take it as an argument like any other.
	sp.DashDash = !g.policy.legacy
	usage, params := g.policy.usage()
	if len(params) > 0 {
		sp.Usage += usage
		sp.Params = params
	}
	return sp
}

func (g *commandGate) Spec() Spec { return g.spec }

// CheckArgs implements [ArgChecker]: the policy check Call makes first.
func (g *commandGate) CheckArgs(args []string) error {
	_, err := g.policy.check(args)
	return err
}

// ArgPatterns implements [ArgPatterner].
func (g *commandGate) ArgPatterns(args []string) []string { return g.policy.patterns(args) }

// OwnsHelp implements [HelpOwner]: a policy that allows "--help" (or
// "-h") alone passes it to the command, whose own help it is; otherwise
// it asks for the gate's usage.
func (g *commandGate) OwnsHelp(arg string) bool { return g.policy.allows(arg) }

// Call runs the command. Its exit status is the gate's; death by signal N
// gives 128+N. When ctx ends the whole process group is killed and the
// error wraps ctx.Err() (exit 124 for a deadline). Processes the command
// leaves behind in its group are killed when it exits.
func (g *commandGate) Call(ctx context.Context, c *Call) (int, error) {
	tail, err := g.policy.check(c.Args)
	if err != nil {
		return 0, err
	}
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", g.name, err)
	}

	// The child gets the write ends of our own pipes, so cmd.Wait returns as
	// soon as the command exits, even if something it started holds them.
	var closers []io.Closer
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	env := g.env
	if g.refs {
		// Read at each call: a secret with refresh may have changed.
		if env, err = g.secrets.ExpandAll(ctx, env, g.trust); err != nil {
			return 0, fmt.Errorf("%s: env: %w", g.name, err)
		}
	}
	home := g.home
	if home == "" && g.iso != nil {
		home = isolatedHome // private to the run already
	} else if home == "" {
		// A fresh, empty HOME: nothing a previous call left (a
		// .gitconfig, say) is read by this one.
		if home, err = os.MkdirTemp("", "gatebridge-home-"); err != nil {
			return 0, fmt.Errorf("%s: private HOME: %w", g.name, err)
		}
		defer os.RemoveAll(home)
	}
	env = append(slices.Clip(env), "HOME="+home)
	dir := g.dir
	if g.iso != nil && g.dir != "" {
		// In its own sandbox, git would still run a planted repository's
		// core.fsmonitor there, with the gate's secrets in its
		// environment (and encode them into its output).
		env = append(env, g.gitEnv...)
	}
	if g.iso == nil && g.hostCwd != nil {
		// On the host where the sandbox writes: git uses no repository
		// the sandbox could have planted, and the directory is the one
		// reached without a link, not whatever its path leads to now.
		env = append(env, g.gitEnv...)
		var release func()
		if dir, release, err = g.hostCwd.open(); err != nil {
			return 0, fmt.Errorf("%s: %w", g.name, err)
		}
		defer release()
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", g.name, err)
	}
	closers = append(closers, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll()
		return 0, fmt.Errorf("%s: %w", g.name, err)
	}
	closers = append(closers, errR, errW)
	var inR, inW *os.File
	if g.stdin && len(c.Stdin) > 0 {
		if inR, inW, err = os.Pipe(); err != nil {
			closeAll()
			return 0, fmt.Errorf("%s: %w", g.name, err)
		}
		closers = append(closers, inR, inW)
	}
	defer closeAll()

	cmd := exec.CommandContext(ctx, g.path)
	cmd.Args = append(slices.Clone(g.argv), tail...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = outW, errW
	if inR != nil {
		cmd.Stdin = inR
	}
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = time.Second

	var outTrunc, errTrunc bool
	done := make(chan struct{}, 3)
	workers := 0
	started := func() {
		outW.Close()
		errW.Close()
		if inR != nil {
			inR.Close()
		}
		red := g.secrets.Redactor()
		go func() { outTrunc = copyCapped(stdout(c), outR, g.maxOut, red); done <- struct{}{} }()
		go func() { errTrunc = copyCapped(stderr(c), errR, g.maxOut, red); done <- struct{}{} }()
		workers = 2
		if inW != nil {
			workers++
			go func() { inW.Write(c.Stdin); inW.Close(); done <- struct{}{} }()
		}
	}
	var waitErr error
	if g.iso != nil {
		// In its own sandbox; what it leaves behind is gone once
		// runIsolated returns (the isolator's cleanup).
		var startErr error
		if waitErr, startErr = runIsolated(ctx, g.iso, g.isoSpec, cmd, started); startErr != nil {
			return 0, fmt.Errorf("%s: start %s: %w", g.name, g.argv[0], startErr)
		}
	} else {
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("%s: start %s: %w", g.name, g.argv[0], err)
		}
		started()
		waitErr = cmd.Wait()
	}
	killGroup(cmd.Process.Pid) // whatever the command left behind
	grace := time.NewTimer(time.Second)
	defer grace.Stop()
	for workers > 0 {
		select {
		case <-done:
			workers--
		case <-grace.C:
			// Something outside the group (setsid) still holds a pipe:
			// closing our ends unblocks the copies.
			closeAll()
		}
	}

	if outTrunc {
		fmt.Fprintf(stderr(c), "\ngatebridge: %s: stdout truncated at %d bytes\n", g.name, g.maxOut)
	}
	if errTrunc {
		fmt.Fprintf(stderr(c), "\ngatebridge: %s: stderr truncated at %d bytes\n", g.name, g.maxOut)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: command stopped: %w", g.name, err)
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return exitStatus(ee.ProcessState), nil
	}
	if waitErr != nil {
		return 0, fmt.Errorf("%s: %w", g.name, waitErr)
	}
	return ExitOK, nil
}

// copyCapped copies src to dst up to max bytes, drains the rest, and
// reports whether anything was dropped. Secrets are redacted before the
// cap: a cut that splits one would leave its start, which no later
// redaction recognizes (the cut is where the sandbox puts it, with the
// arguments that come out before the secret); what the redactor holds at
// the cut is dropped ([secrets.Writer.Cut]).
func copyCapped(dst io.Writer, src io.Reader, max int64, red *secrets.Redactor) (truncated bool) {
	w := red.Writer(dst)
	io.Copy(w, io.LimitReader(src, max))
	n, _ := io.Copy(io.Discard, src)
	if n > 0 {
		w.Cut()
	} else {
		w.Flush()
	}
	return n > 0
}
