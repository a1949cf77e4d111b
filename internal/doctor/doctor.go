// Package doctor is the checks of `gatebridge doctor`: which sandbox
// backends can run here, the inotify limits, the session directory's
// filesystem, the wake-up mechanism, the gates and their programs'
// sandboxes, the secrets, and what auto would choose. cmd/gatebridge
// builds the Options and prints the findings.
package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/secrets"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Statuses of a finding.
const (
	statusOK      = sandbox.StatusOK
	statusWarn    = sandbox.StatusWarn    // works, with a caveat
	statusProblem = sandbox.StatusProblem // does not work here
)

// Finding is one line of `gatebridge doctor` (and one object of --json).
type Finding = sandbox.Finding

// Options are what the checks need: the config and what cmd/gatebridge
// makes of it (it alone imports the concrete backends and builds gates).
type Options struct {
	Config *config.Config
	// ConfigFile is the config file read, resolved ("" for none);
	// ConfigGiven the absolute path it was named by.
	ConfigFile, ConfigGiven string
	Backends                *sandbox.Registry
	Settings                sandbox.Settings // the settings every backend is made with
	// Auto is what sandbox.backend auto would choose, with the code run
	// uses: the backend, its entry and why.
	Auto func(ctx context.Context) (sandbox.Backend, sandbox.BackendEntry, string, error)
	// Gates builds the configured gates for the current workspace, with
	// the kind of each gate; warn gets what is skipped.
	Gates func(ctx context.Context, warn func(string)) (*gates.Registry, map[string]string, error)
	Kinds *gates.KindRegistry
	// SourceKinds are the kinds of the config's gate sources.
	SourceKinds []string
	Secrets     *secrets.Store
	// Untrusted are the directories the sandbox can write (secrets.Store.Check).
	Untrusted []string
	// Isolator runs gates' programs in sandboxes of their own.
	Isolator func() gates.Isolator
	// DefaultGateUID is the uid gate programs run as when root and
	// sandbox.gate_uid is 0.
	DefaultGateUID int
}

// Run runs every check; ok is false when the configured backend cannot
// run here.
func Run(ctx context.Context, o Options) (checks []Finding, ok bool) {
	add := func(c Finding) { checks = append(checks, c) }
	usable := map[string]bool{}
	cfg := o.Config

	add(configCheck(o))
	if c, found := ignoredCwdConfig(o); found {
		add(c)
	}

	s := o.Settings
	for _, e := range o.Backends.Entries() {
		b, err := e.New(s)
		found := e.Findings(ctx, b, err, s)
		if b != nil {
			sandbox.Close(b)
		}
		usable[e.Name] = !slices.ContainsFunc(found, func(f Finding) bool { return f.Status == statusProblem })
		checks = append(checks, found...)
	}

	add(gatesCheck(ctx, o))
	checks = append(checks, secretChecks(ctx, o)...)
	checks = append(checks, gateRunChecks(ctx, o)...)
	checks = append(checks, inotifyChecks(readProc)...)

	sessionDir := cfg.Bridge.SessionDir
	if sessionDir == "" {
		sessionDir = bridge.DefaultDir() // where bridge.Open puts sessions
	}
	add(fsCheck("session dir", sessionDir))
	if root := cfg.Sandbox.Docker.SessionsRoot; root != "" {
		add(fsCheck("docker sessions root", root))
	}
	add(wakeCheck(sessionDir))
	add(watchCheck(cfg, sessionDir))

	// What auto would choose, with the same code run uses.
	autoName := ""
	if b, e, why, err := o.Auto(ctx); err != nil {
		add(problem("auto", err))
	} else {
		sandbox.Close(b)
		autoName = e.Name
		c := Finding{Check: "auto", Status: statusOK, Detail: "would choose " + autoName + " (" + why + ")"}
		if e.Strength == 0 {
			c.Status = statusWarn
			c.Detail += "; commands would run UNSANDBOXED"
			c.Hint = "install bubblewrap or start docker with the image present; sandbox.allow_unsandboxed allows this fallback"
		}
		add(c)
	}

	conf := cfg.Sandbox.Backend
	c := Finding{Check: "configured backend"}
	switch {
	case conf == config.AutoBackend && autoName != "":
		c.Status, c.Detail, ok = statusOK, "sandbox.backend=auto can run here; it picks "+autoName, true
	case conf == config.AutoBackend:
		c.Status, c.Detail = statusProblem, "sandbox.backend=auto cannot run here: it never falls back to local unless sandbox.allow_unsandboxed is set"
		c.Hint = "install bubblewrap or start docker with the image present, or choose --sandbox local knowingly"
	case usable[conf]:
		c.Status, c.Detail, ok = statusOK, "sandbox.backend="+conf+" can run here", true
	default:
		c.Status, c.Detail = statusProblem, "sandbox.backend="+conf+" cannot run here (see above)"
		c.Hint = "fix the problem above, or choose another backend with --sandbox or sandbox.backend"
	}
	add(c)
	return checks, ok
}

// problem turns a backend error into a problem line with its hint.
func problem(name string, err error) Finding {
	return Finding{Check: name, Status: statusProblem, Detail: err.Error(), Hint: hint.Of(err)}
}

// inotify limits: below warn, gatebridge still works but may lose events
// (the rescan then finds the calls, up to bridge.rescan_interval late) or
// fall back to polling.
var inotifyLimits = []struct {
	name   string
	warn   int64
	effect string
	hint   string
}{
	{"max_user_watches", 8192,
		"one watch per session (calls/) plus one per call directory being written; shared with every other program of this user",
		"sysctl -w fs.inotify.max_user_watches=524288"},
	{"max_user_instances", 128,
		"one inotify instance per gatebridge process; when none is left a session falls back to polling (slower calls)",
		"sysctl -w fs.inotify.max_user_instances=1024"},
	{"max_queued_events", 16384,
		"events queued before an overflow drops them; the rescan then finds the calls, up to bridge.rescan_interval late",
		"sysctl -w fs.inotify.max_queued_events=16384"},
}

func readProc(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}

// inotifyChecks reads /proc/sys/fs/inotify/* through read.
func inotifyChecks(read func(string) (string, error)) []Finding {
	var out []Finding
	for _, l := range inotifyLimits {
		raw, err := read("/proc/sys/fs/inotify/" + l.name)
		out = append(out, inotifyCheck(l.name, raw, err, l.warn, l.effect, l.hint))
	}
	return out
}

func inotifyCheck(name, raw string, readErr error, warn int64, effect, hint string) Finding {
	c := Finding{Check: "inotify " + name}
	if readErr != nil {
		c.Status = statusWarn
		c.Detail = "cannot read: " + readErr.Error() + "; gatebridge polls when events cannot be set up"
		return c
	}
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		c.Status = statusWarn
		c.Detail = fmt.Sprintf("unreadable value %q", strings.TrimSpace(raw))
		return c
	}
	if n < warn {
		c.Status = statusWarn
		c.Detail = fmt.Sprintf("%d, below %d: %s", n, warn, effect)
		c.Hint = hint
		return c
	}
	c.Status = statusOK
	c.Detail = fmt.Sprintf("%d (warn below %d)", n, warn)
	return c
}

// fsKind classifies a statfs f_type magic number.
type fsKind struct {
	Name  string
	Lossy bool // filesystem events may be lost or never arrive
	Known bool
}

// Magic numbers from linux/magic.h and statfs(2).
var fsMagic = map[int64]fsKind{
	0x01021994: {"tmpfs", false, true},
	0xEF53:     {"ext2/3/4", false, true},
	0x58465342: {"xfs", false, true},
	0x9123683E: {"btrfs", false, true},
	0x2FC12FC1: {"zfs", false, true},
	0xF2F52010: {"f2fs", false, true},
	0x6969:     {"nfs", true, true},
	0x517B:     {"smb", true, true},
	0xFE534D42: {"smb2", true, true},
	0xFF534D42: {"cifs", true, true},
	0x65735546: {"fuse", true, true},
	0x794C7630: {"overlayfs", true, true},
	0x01021997: {"9p", true, true},
	0x00C36400: {"ceph", true, true},
	0x47504653: {"gpfs", true, true},
	0x0BD00BD0: {"lustre", true, true},
	0x73717368: {"squashfs", false, true},
}

func classifyFS(magic int64) fsKind {
	if k, ok := fsMagic[magic]; ok {
		return k
	}
	return fsKind{Name: fmt.Sprintf("unknown (0x%X)", magic)}
}

// fsResult turns a classification of dir into a check line.
func fsResult(check, dir string, k fsKind) Finding {
	c := Finding{Check: check + " filesystem"}
	switch {
	case k.Lossy:
		c.Status = statusWarn
		c.Detail = fmt.Sprintf("%s is on %s: filesystem events may be lost or never arrive there; the periodic rescan (bridge.rescan_interval) still finds every call, later", dir, k.Name)
		c.Hint = "put sessions on a local filesystem (tmpfs, ext4, xfs, btrfs) with bridge.session_dir, or use --watch poll"
	case k.Known:
		c.Status = statusOK
		c.Detail = fmt.Sprintf("%s is on %s: events are reliable", dir, k.Name)
	default:
		c.Status = statusOK
		c.Detail = fmt.Sprintf("%s is on %s: not a filesystem known to lose events; the rescan covers losses", dir, k.Name)
	}
	return c
}

// watchCheck opens a throwaway session to learn how calls will be noticed.
func watchCheck(cfg *config.Config, dir string) Finding {
	c := Finding{Check: "watch"}
	var warnings []string
	sess, err := bridge.Open(bridge.Config{
		Gates: gates.NewRegistry(), Dir: dir, Watch: bridge.WatchMode(cfg.Bridge.Watch),
		Logf: func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) },
	})
	if err != nil {
		c.Status, c.Detail = statusProblem, "cannot open a session in "+dir+": "+err.Error()
		c.Hint = "bridge.session_dir must be a writable directory"
		return c
	}
	mode := sess.WatchMode()
	_ = sess.Close()
	switch {
	case mode == bridge.WatchEvents:
		c.Status, c.Detail = statusOK, "filesystem events (inotify) plus a rescan every "+cfg.Bridge.RescanInterval.String()
	case cfg.Bridge.Watch == string(bridge.WatchPoll):
		c.Status, c.Detail = statusOK, "polling every "+cfg.Bridge.PollInterval.String()+" (bridge.watch=poll)"
	default:
		c.Status, c.Detail = statusWarn, "polling every "+cfg.Bridge.PollInterval.String()+": events could not be set up"
		if len(warnings) > 0 {
			c.Detail += " (" + strings.TrimPrefix(warnings[0], "gatebridge: ") + ")"
		}
		c.Hint = "raise fs.inotify.max_user_instances / max_user_watches (see above)"
	}
	return c
}

// configCheck says which config file was read (it passed the trust
// checks, or gatebridge would have refused to start) or where none was found.
func configCheck(o Options) Finding {
	if o.ConfigFile != "" {
		d := "read " + o.ConfigGiven
		if o.ConfigFile != o.ConfigGiven {
			d += " (" + o.ConfigFile + ")"
		}
		return Finding{Check: "config", Status: statusOK,
			Detail: d + ": owned by you or root, writable by no one else, outside the workspace and sessions"}
	}
	looked := "$GATEBRIDGE_CONFIG unset"
	if c := config.Candidates(); len(c) > 0 {
		looked += ", no " + c[0]
	}
	return Finding{Check: "config", Status: statusOK, Detail: "none (" + looked + "): the defaults"}
}

// ignoredCwdConfig warns about a ./gatebridge.yaml that older versions
// read: it is never read now (the sandbox can write the current directory).
func ignoredCwdConfig(o Options) (Finding, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return Finding{}, false
	}
	p := filepath.Join(wd, "gatebridge.yaml")
	if _, err := os.Lstat(p); err != nil {
		return Finding{}, false
	}
	if real, err := filepath.EvalSymlinks(p); err == nil && real == o.ConfigFile {
		return Finding{}, false
	}
	dest := "$XDG_CONFIG_HOME/gatebridge/gatebridge.yaml"
	if c := config.Candidates(); len(c) > 0 {
		dest = c[0]
	}
	return Finding{Check: "config in the current directory", Status: statusWarn,
		Detail: p + " is never read: the sandbox can write the current directory (the default workspace), and a config defines host commands",
		Hint:   "if you wrote it and trust it, move it to " + dest + " (or pass --config with a path outside the workspace)"}, true
}

// gatesCheck builds the configured gates (for the current workspace) and
// counts them by kind, in the order kinds holds them. Package gates' own
// kinds (builtin, command) are always listed; a kind registered on top
// (mcp) only when the config declares a source of it.
func gatesCheck(ctx context.Context, o Options) Finding {
	var warnings []string
	reg, kindOf, err := o.Gates(ctx, func(w string) { warnings = append(warnings, w) })
	if err == nil {
		reg.Close()
	}
	if err != nil {
		return problem("gates", err)
	}
	configured := map[string]bool{}
	for _, k := range gates.NewKindRegistry().Kinds() {
		configured[k.Name] = true
	}
	for _, k := range o.SourceKinds {
		configured[k] = true
	}
	var parts []string
	for _, k := range o.Kinds.Kinds() {
		if !configured[k.Name] {
			continue
		}
		var names []string
		for name, kind := range kindOf {
			if kind == k.Name {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		p := fmt.Sprintf("%d %s", len(names), k.Name)
		if len(names) > 0 {
			p += " (" + strings.Join(names, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if len(warnings) > 0 {
		return Finding{Check: "gates", Status: statusWarn, Detail: strings.Join(parts, "; ") + "; " + strings.Join(warnings, "; "),
			Hint: "pick other names with mcp.servers.NAME.prefix, or list the tools you want with mcp.servers.NAME.tools"}
	}
	return Finding{Check: "gates", Status: statusOK, Detail: strings.Join(parts, "; ")}
}

// gateRunChecks says, for each command gate and stdio MCP server, how its
// program runs: in a sandbox of its own (what it reaches, as whom), on
// the host (isolate.host: a warning), or not at all because no sandbox
// for gate programs can run here (a problem: the gate is refused).
func gateRunChecks(ctx context.Context, o Options) []Finding {
	cfg := o.Config
	type prog struct {
		check, key string
		iso        config.IsolateConfig
	}
	var progs []prog
	for i, c := range cfg.Gates.Commands {
		progs = append(progs, prog{"gate " + c.Name, fmt.Sprintf("gates.commands[%d]", i), c.Isolate})
	}
	for _, name := range config.SortedKeys(cfg.MCP.Servers) {
		if c := cfg.MCP.Servers[name]; len(c.Command) > 0 {
			progs = append(progs, prog{"mcp server " + name, "mcp.servers." + name, c.Isolate})
		}
	}
	var checkErr error
	checked := false
	who := "as gatebridge's own user"
	if os.Geteuid() == 0 {
		who = fmt.Sprintf("as uid %d (sandbox.gate_uid; never root)", cmp.Or(cfg.Sandbox.GateUID, o.DefaultGateUID))
	}
	var out []Finding
	for _, p := range progs {
		spec := p.iso.Spec()
		c := Finding{Check: p.check, Status: statusOK, Detail: "runs " + spec.String()}
		switch {
		case spec.Host:
			c.Status = statusWarn
			c.Hint = "drop " + p.key + ".isolate.host to run it in a sandbox of its own"
		default:
			if !checked {
				checkErr, checked = o.Isolator().(gates.IsolationChecker).Check(ctx), true
			}
			if checkErr != nil {
				c.Status, c.Detail = statusProblem, "refused: its sandbox cannot run here: "+checkErr.Error()
				c.Hint = strings.TrimSpace(hint.Of(checkErr) + "; or set " + p.key + ".isolate: {host: true} to run it on the host")
			} else {
				c.Detail += ", " + who
			}
		}
		out = append(out, c)
	}
	return out
}

// secretChecks are doctor's lines for the secrets: each read (command
// sources run) and said to resolve or not; never a value.
func secretChecks(ctx context.Context, o Options) []Finding {
	var out []Finding
	errs := o.Secrets.Check(ctx, o.Untrusted)
	for _, name := range o.Secrets.Names() {
		src, _ := o.Secrets.Source(name)
		c := Finding{Check: "secret " + name, Status: statusOK, Detail: "resolves (" + src.String() + ")"}
		if err := errs[name]; err != nil {
			c.Status, c.Detail = statusProblem, fmt.Sprintf("does not resolve (%s): %v", src, errors.Unwrap(err))
			c.Hint = hint.Of(err)
		}
		out = append(out, c)
	}
	return out
}
