package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// Persistent sandbox labels, read back by [Backend.Open].
const (
	LabelSessionsRoot      = "io.gatebridge.sessions-root"
	LabelSessionsPath      = "io.gatebridge.sessions-path"
	LabelWorkspace         = "io.gatebridge.workspace"
	LabelWorkspaceWritable = "io.gatebridge.workspace-writable"
	LabelUser              = "io.gatebridge.user"
	// LabelWake records, at start, whether FIFO wake-ups reach the
	// container ("fifo") or wrappers must poll ("poll"), so each exec need
	// not ask the engine (GET /info) again.
	LabelWake = "io.gatebridge.wake"
	// LabelHostEvents is "false" when the host's inotify does not see
	// what the container writes (its OCI runtime, measured at start), and
	// LabelGrant "owner" when sessions are handed to it by ownership, not
	// by ACL ([Crossing]).
	LabelHostEvents = "io.gatebridge.host-events"
	LabelGrant      = "io.gatebridge.grant"
	// LabelOwned marks a persistent sandbox that lives only as long as the
	// process that started it (StartOptions.Owned): "true".
	LabelOwned = "io.gatebridge.owned"
	// LabelAgent is the host path of the agent directory of a sandbox
	// whose commands go through `gatebridge agent` (Config.Agent).
	LabelAgent = "io.gatebridge.agent"
)

// AgentPath is where a persistent sandbox sees its agent directory, and
// AgentBinary the agent's binary. AgentSh as [Config.Agent] runs the sh
// agent ([agent.ShScript]) with the image's /bin/sh instead of a binary.
const (
	AgentSh     = "sh"
	AgentPath   = "/gatebridge/agent"
	AgentBinary = "/gatebridge/bin/gatebridge"
	agentDir    = ".agent" // under the sessions root
)

// DefaultSessionsPath is where [StartOptions.SessionsRoot] is mounted.
const DefaultSessionsPath = "/gatebridge/sessions"

// ContainerPrefix prefixes persistent container names.
const ContainerPrefix = "gatebridge-"

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ValidName reports whether name is a name a persistent sandbox may have
// (1-63 letters, digits, '_', '.' or '-', starting with a letter or
// digit), so that a front end can refuse a bad one before the engine is
// asked.
func ValidName(name string) bool { return validName.MatchString(name) }

// ErrNotFound is returned when no persistent sandbox has the given name.
var ErrNotFound = errors.New("docker: no such persistent sandbox")

// StartOptions configure a persistent sandbox ([Backend.Start]). Image,
// limits and user come from the backend's [Config].
type StartOptions struct {
	// Name identifies the sandbox; the container is gatebridge-<Name>.
	Name string
	// SessionsRoot is the host directory under which every session run in
	// this sandbox must live; it is created if missing and mounted once,
	// read-write, at SessionsPath.
	SessionsRoot string
	// SessionsPath is the inside mount point; default /gatebridge/sessions.
	SessionsPath string
	// Workspace is an optional host directory mounted at
	// [Config.WorkspacePath], read-only unless WorkspaceWritable.
	Workspace         string
	WorkspaceWritable bool
	// UID and GID are the identity commands run as when gatebridge is root
	// (see [sandbox.Spec.UID]); uid 0 is refused unless AllowRoot.
	UID, GID  int
	AllowRoot bool
	// ProtectedPaths stay read-only in a writable workspace
	// ([sandbox.Spec.ProtectedPaths]).
	ProtectedPaths []string
	// Owned ties the sandbox to this process: Backend.Open refuses it, and
	// Backend.Prune removes it, as it removes per-command
	// containers, once the process that started it is gone (a protocol
	// server that crashed). Without it a persistent sandbox lives until
	// stopped.
	Owned bool
	// Sleeper is the long-running init command; default
	// ["sleep", "2147483647"] (busybox and coreutils both accept it).
	Sleeper []string
}

// Sandbox is a long-lived container that runs each command as an exec. It
// implements [sandbox.Backend] (Name "docker", Info mode "persistent").
//
// # Weaker isolation
//
// Bind mounts cannot be added per exec, so the whole sessions root is
// mounted read-write once: bin/ and responses/ of a session are not
// read-only mounts. Run mitigates this when gatebridge runs as root: the
// container user is not root, calls/ and tmp/ are chowned to it, and bin/
// and responses/ (and the files already in them) are owned by the host
// user and not writable by group or others (Run clears those bits), so the command cannot write or replace
// them. Commands of different sessions run
// as the same user and can reach each other's calls/ and tmp/: run
// sessions with different trust in different sandboxes. When gatebridge
// runs as a non-root user the container runs as that user and can write
// bin/ and responses/ too; policy still lives on the host.
type Sandbox struct {
	b            *Backend
	id           string
	name         string
	image        string
	user         string
	sessionsRoot string // host, cleaned, symlinks resolved
	sessionsPath string
	workspace    string
	wsWritable   bool
	protected    []sandbox.Protected // known to the process that started it
	agentDir     string              // host; "" runs commands with the exec API

	agentMu sync.Mutex
	agent   *agent.Conn
}

var _ sandbox.Backend = (*Sandbox)(nil)

// Name returns "docker".
func (s *Sandbox) Name() string { return Name }

// ID returns the container id.
func (s *Sandbox) ID() string { return s.id }

// SandboxName returns the name given to Start.
func (s *Sandbox) SandboxName() string { return s.name }

// SessionsRoot returns the host directory sessions must be created under.
func (s *Sandbox) SessionsRoot() string { return s.sessionsRoot }

// Workspace returns the host workspace the sandbox was started with ("":
// none).
func (s *Sandbox) Workspace() string { return s.workspace }

// WorkspaceWritable reports whether the workspace is mounted writable.
func (s *Sandbox) WorkspaceWritable() bool { return s.wsWritable }

// Start creates and starts the persistent sandbox opts.Name. It fails if a
// container of that name exists (see [Backend.Open]).
func (b *Backend) Start(ctx context.Context, opts StartOptions) (*Sandbox, error) {
	if !validName.MatchString(opts.Name) {
		return nil, fmt.Errorf("docker: invalid sandbox name %q", opts.Name)
	}
	if opts.SessionsRoot == "" {
		return nil, errors.New("docker: start: sessions root is required")
	}
	if opts.SessionsPath == "" {
		opts.SessionsPath = DefaultSessionsPath
	}
	if len(opts.Sleeper) == 0 {
		opts.Sleeper = []string{"sleep", "2147483647"}
	}
	if err := os.MkdirAll(opts.SessionsRoot, 0o755); err != nil {
		return nil, fmt.Errorf("docker: create sessions root: %w", err)
	}
	root, err := filepath.EvalSymlinks(opts.SessionsRoot)
	if err != nil {
		return nil, fmt.Errorf("docker: sessions root: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, err
	}
	ws := ""
	if opts.Workspace != "" {
		if ws, err = filepath.Abs(opts.Workspace); err != nil {
			return nil, err
		}
	}
	// Each sandbox needs its own sessions root: the root is mounted
	// read-write, so two sandboxes sharing one could reach each other's
	// live sessions (calls, responses).
	others, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		if o.Name != opts.Name && o.SessionsRoot != "" && (fspath.Within(root, o.SessionsRoot) || fspath.Within(o.SessionsRoot, root)) {
			return nil, &sandbox.Error{Backend: "docker", Op: "start " + opts.Name,
				Err:  fmt.Errorf("sessions root %s overlaps %s, the sessions root of sandbox %s", root, o.SessionsRoot, o.Name),
				Help: "give each sandbox its own --sessions-root (the default does)"}
		}
	}
	user, _, _, err := b.containerUser(opts.UID, opts.GID, opts.AllowRoot)
	if err != nil {
		return nil, err
	}
	// The image as on every path: allowed, present or pulled (serve's
	// sandbox/open and the pool start here too).
	if err := b.EnsureImage(ctx); err != nil {
		return nil, err
	}
	if err := b.checkRuntime(ctx); err != nil {
		return nil, err
	}
	if err := b.checkLimits(ctx, b.cfg.Memory, b.cfg.NanoCPUs, b.cfg.PidsLimit); err != nil {
		return nil, err
	}
	cross, err := b.crossing(ctx)
	if err != nil {
		return nil, err
	}
	mounts := []mount.Mount{bind(root, opts.SessionsPath, false)}
	var protected []sandbox.Protected
	started := false
	if ws != "" {
		mounts = append(mounts, bind(ws, b.cfg.WorkspacePath, !opts.WorkspaceWritable))
		protected, err = sandbox.ProtectedPaths("docker", &sandbox.Spec{Workspace: ws, WorkspaceWritable: opts.WorkspaceWritable, ProtectedPaths: opts.ProtectedPaths})
		if err != nil {
			return nil, err
		}
		// Until the sandbox runs, a failure removes what was made for it.
		defer func() {
			if !started {
				sandbox.CleanupProtected(protected)
			}
		}()
		if err := sandbox.PrepareProtected("docker", protected); err != nil {
			return nil, err
		}
		staged, unstage, err := b.stageProtected(ctx, ws, protected)
		if err != nil {
			return nil, err
		}
		defer unstage() // once the container is started, it has its mounts
		// Missing ones keep their (empty, read-only) mount point for the
		// sandbox's life; Sandbox.Stop of this Sandbox removes it, a stop
		// by name from another process (`sandbox stop`) does not know it.
		mounts = append(mounts, protectedMounts(protected, ws, b.cfg.WorkspacePath, staged)...)
	}
	// The agent: req/ read-only inside (also through the sessions mount,
	// which a read-only bind of .agent/ over it shadows), out/ writable
	// by the container user alone.
	var entry []string
	agentHost := ""
	if b.cfg.Agent != "" && !b.usePoll(ctx) {
		agentHost = filepath.Join(root, agentDir)
		auid, agid := os.Geteuid(), os.Getegid()
		if u, g, ok := parseUser(user); ok && os.Geteuid() == 0 {
			auid, agid = u, g
		}
		if err := agent.Prepare(agentHost, auid, agid); err != nil {
			return nil, &sandbox.Error{Backend: "docker", Op: "start " + opts.Name, Err: fmt.Errorf("prepare the agent directory: %w", err)}
		}
		mounts = append(mounts,
			bind(agentHost, path.Join(opts.SessionsPath, agentDir), true),
			bind(filepath.Join(agentHost, agent.DirReq), path.Join(AgentPath, agent.DirReq), true),
			bind(filepath.Join(agentHost, agent.DirOut), path.Join(AgentPath, agent.DirOut), false))
		if b.cfg.Agent == AgentSh {
			entry = []string{"/bin/sh", "-c", agent.ShScript, "gatebridge-agent", AgentPath}
		} else {
			mounts = append(mounts, bind(b.cfg.Agent, AgentBinary, true))
			entry = []string{AgentBinary, "agent", "--dir", AgentPath}
		}
	}
	labels := b.labels(nil, map[string]string{
		LabelPersistent:        opts.Name,
		LabelSessionsRoot:      root,
		LabelSessionsPath:      opts.SessionsPath,
		LabelWorkspace:         ws,
		LabelWorkspaceWritable: strconv.FormatBool(opts.WorkspaceWritable),
		LabelWake:              wakeLabel(b.usePoll(ctx)),
		LabelUser:              user,
	})
	if !cross.Events {
		labels[LabelHostEvents] = "false"
	}
	if !cross.ACL {
		labels[LabelGrant] = grantOwners
	}
	if opts.Owned {
		labels[LabelOwned] = "true"
	}
	if agentHost != "" {
		labels[LabelAgent] = agentHost
		opts.Sleeper = entry
	}
	workdir := "/"
	if ws != "" {
		workdir = b.cfg.WorkspacePath
	}
	cfg := &container.Config{
		Image:      b.cfg.Image,
		User:       user,
		Env:        []string{"PATH=" + DefaultPath},
		Entrypoint: opts.Sleeper[:1],
		Cmd:        opts.Sleeper[1:],
		WorkingDir: workdir,
		Labels:     labels,
	}
	hc, err := b.hostConfig(ctx, mounts)
	if err != nil {
		return nil, err
	}
	if testHookBeforeCreate != nil {
		testHookBeforeCreate(ws)
	}
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	created, err := b.cli.ContainerCreate(cctx, client.ContainerCreateOptions{
		Name: ContainerPrefix + opts.Name, Config: cfg, HostConfig: b.scalePids(ctx, hc)})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return nil, &sandbox.Error{Backend: "docker", Op: "start " + opts.Name,
				Err:  fmt.Errorf("persistent sandbox %s already exists: %w", opts.Name, err),
				Help: fmt.Sprintf("reuse it with --reuse %s, or remove it with `gatebridge sandbox stop %s`", opts.Name, opts.Name)}
		}
		return nil, b.createError(err)
	}
	if _, err := b.cli.ContainerStart(cctx, created.ID, client.ContainerStartOptions{}); err != nil {
		b.remove(ctx, created.ID)
		return nil, startError(err)
	}
	started = true
	return &Sandbox{b: b, id: created.ID, name: opts.Name, image: b.cfg.Image, user: user,
		sessionsRoot: root, sessionsPath: opts.SessionsPath, workspace: ws, wsWritable: opts.WorkspaceWritable,
		protected: protected, agentDir: agentHost}, nil
}

// Open returns the running persistent sandbox name (for `run --reuse`).
func (b *Backend) Open(ctx context.Context, name string) (*Sandbox, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("docker: invalid sandbox name %q", name)
	}
	res, err := b.cli.ContainerInspect(ctx, ContainerPrefix+name, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, &sandbox.Error{Backend: "docker", Op: "open " + name, Err: fmt.Errorf("%w: %s", ErrNotFound, name),
				Help: fmt.Sprintf("start it with `gatebridge sandbox start %s`", name)}
		}
		return nil, engineError("inspect "+name, err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelPersistent] != name || c.Config.Labels[LabelOwner] != OwnerValue {
		return nil, fmt.Errorf("docker: container %s is not a gatebridge sandbox", ContainerPrefix+name)
	}
	if c.Config.Labels[LabelOwned] == "true" {
		return nil, &sandbox.Error{Backend: "docker", Op: "open " + name, Err: fmt.Errorf("sandbox %s belongs to the gatebridge process %s (a protocol connection)", name, c.Config.Labels[LabelPID]),
			Help: "run commands in it through that connection, or start your own with `gatebridge sandbox start`"}
	}
	if c.State == nil || !c.State.Running {
		return nil, &sandbox.Error{Backend: "docker", Op: "open " + name, Err: fmt.Errorf("persistent sandbox %s is not running", name),
			Help: fmt.Sprintf("remove it with `gatebridge sandbox stop %s` and start it again", name)}
	}
	l := c.Config.Labels
	if w := l[LabelWake]; w == "poll" || w == "fifo" {
		b.setCrossing(Crossing{FIFO: w == "fifo", Events: l[LabelHostEvents] != "false", ACL: l[LabelGrant] != grantOwners, HostTasks: 1})
	}
	return &Sandbox{b: b, id: c.ID, name: name, image: c.Config.Image, user: l[LabelUser],
		sessionsRoot: l[LabelSessionsRoot], sessionsPath: l[LabelSessionsPath],
		workspace: l[LabelWorkspace], wsWritable: l[LabelWorkspaceWritable] == "true", agentDir: l[LabelAgent]}, nil
}

// Close lets go of the agent connection (the sandbox runs on).
func (s *Sandbox) Close() error {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	if s.agent != nil {
		s.agent.Close()
		s.agent = nil
	}
	return nil
}

// Stop removes the sandbox's container.
func (s *Sandbox) Stop(ctx context.Context) error {
	s.Close()
	err := s.b.Stop(ctx, s.name)
	if err == nil {
		// The empty mount points left for missing protected paths (an empty
		// .git/ would make the workspace look like a broken repository).
		sandbox.CleanupProtected(s.protected)
	}
	return err
}

// Stop force-removes the persistent sandbox name; a missing one is
// [ErrNotFound].
func (b *Backend) Stop(ctx context.Context, name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("docker: invalid sandbox name %q", name)
	}
	res, err := b.cli.ContainerInspect(ctx, ContainerPrefix+name, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return engineError("inspect "+name, err)
	}
	if res.Container.Config == nil || res.Container.Config.Labels[LabelPersistent] != name {
		return fmt.Errorf("docker: container %s is not a gatebridge sandbox", ContainerPrefix+name)
	}
	if err := b.remove(ctx, res.Container.ID); err != nil {
		return engineError("remove "+name, err)
	}
	return nil
}

// Info describes a persistent sandbox.
type Info struct {
	Name         string
	ID           string
	Image        string
	State        string // running, exited, …
	Status       string // human-readable, e.g. "Up 2 minutes"
	SessionsRoot string
	Workspace    string
	Created      time.Time
}

// List returns the persistent sandboxes, running or not.
func (b *Backend) List(ctx context.Context) ([]Info, error) {
	f := client.Filters{}
	f.Add("label", LabelOwner+"="+OwnerValue)
	f.Add("label", LabelPersistent)
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineError("list containers", err)
	}
	out := make([]Info, 0, len(res.Items))
	for _, c := range res.Items {
		out = append(out, Info{
			Name: c.Labels[LabelPersistent], ID: c.ID, Image: c.Image,
			State: string(c.State), Status: c.Status,
			SessionsRoot: c.Labels[LabelSessionsRoot], Workspace: c.Labels[LabelWorkspace],
			Created: time.Unix(c.Created, 0),
		})
	}
	return out, nil
}

// PruneOptions configure [Backend.Prune].
type PruneOptions struct {
	// Persistent also removes persistent sandboxes that are not running.
	Persistent bool
}

// Prune removes per-command containers whose owning gatebridge process
// (labels io.gatebridge.pid and io.gatebridge.host) is gone on this host,
// and with opts.Persistent stopped persistent sandboxes. It returns the
// removed container names.
func (b *Backend) Prune(ctx context.Context, opts PruneOptions) (removed []string, err error) {
	f := client.Filters{}
	f.Add("label", LabelOwner+"="+OwnerValue)
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, engineError("list containers", err)
	}
	host, _ := os.Hostname()
	var errs []error
	for _, c := range res.Items {
		if _, ok := c.Labels[LabelPersistent]; ok && c.Labels[LabelOwned] != "true" {
			if !opts.Persistent || c.State == container.StateRunning {
				continue
			}
			// Created but not yet running, recently: another gatebridge
			// is probably starting it right now.
			if c.State == container.StateCreated && time.Since(time.Unix(c.Created, 0)) < startGrace {
				continue
			}
		} else {
			if h := c.Labels[LabelHost]; h != "" && h != host {
				continue
			}
			pid, perr := strconv.Atoi(c.Labels[LabelPID])
			if perr == nil && ownerAlive(pid, c.Labels[LabelStart]) {
				continue
			}
		}
		if rerr := b.remove(ctx, c.ID); rerr != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID[:12], rerr))
			continue
		}
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// inside maps a host path under the sessions root to the container.
func (s *Sandbox) inside(host string) (string, error) {
	if host == "" {
		return "", nil
	}
	abs, err := filepath.Abs(host)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(s.sessionsRoot, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		// Resolve symlinks (e.g. /tmp → /private/tmp) before giving up.
		if r, e := filepath.EvalSymlinks(abs); e == nil && r != abs {
			return s.inside(r)
		}
		return "", fmt.Errorf("%s is not under the sandbox's sessions root %s", host, s.sessionsRoot)
	}
	return path.Join(s.sessionsPath, filepath.ToSlash(rel)), nil
}

// execWrapper runs "$@" as the leader of a new session (so its whole
// process group can be signalled), waits, then kills what the command
// left behind. Its $0 is gatebridge-exec-<token>, the run's random token,
// by which execKill finds it. setsid is resolved with the image PATH
// before the session PATH ($1) is installed, so a wrapper in bin/ cannot
// shadow it. $2, when it is a FIFO, is the run's lease (see makeLease):
// opened after the command started, so the command does not inherit it,
// and watched in the background; EOF means gatebridge died, and the
// command's process group is killed (the container lives on). The
// command's pid stays in a shell variable: the wrapper writes no record
// of it anywhere, since everything the command can write is a claim.
const execWrapper = `P=$1 l=$2; shift 2
exec 3<&0
(
  s=$(command -v setsid) || { echo "gatebridge: setsid not found in the image" >&2; exit 127; }
  PATH=$P; export PATH
  exec "$s" "$@" 0<&3 3<&-
) &
c=$!
exec 3<&-
w=
if [ -p "$l" ] && { exec 9<"$l"; } 2>/dev/null; then
  ( read -r _ <&9; kill -KILL -"$c" ) >/dev/null 2>&1 </dev/null &
  w=$!
  exec 9<&-
fi
wait "$c"; rc=$?
kill -KILL -"$c" 2>/dev/null
[ -n "$w" ] && kill -KILL "$w" 2>/dev/null
exit "$rc"`

// execKill signals, with $2, the process groups of the run whose token is
// $1, waiting briefly for the command to lead its group. It believes only
// /proc: the run's wrapper is the process whose parent is outside the
// container (ppid 0: an exec the engine started; the command cannot make
// one) whose $0, the first gatebridge-exec- in its argv (the command's
// own argv comes after it), is gatebridge-exec-<token>, and the groups to signal
// are those led by a child of that wrapper, which only the command's own
// processes are. (The first version read the command's pgid from a file
// in the session's tmp/, which the command writes: it could turn the
// host's signal on another command's group, or on every process of the
// container with "1".)
const execKill = `t=$1 sig=$2 i=0
case $t in ''|*[!0-9a-f]*) exit 2;; esac
pstat() {
  st=; { read -r st </proc/"$1"/stat; } 2>/dev/null
  set -- ${st##*") "}
  pp=${2-} pg=${3-}
}
while :; do
  w=
  for d in /proc/[0-9]*; do
    pstat "${d#/proc/}"
    [ "$pp" = 0 ] || continue
    a=; { a=$(cat "$d/cmdline"); } 2>/dev/null
    case $a in *gatebridge-exec-*) ;; *) continue;; esac
    case ${a#*gatebridge-exec-} in "$t"*) w=${d#/proc/}; break;; esac
  done
  n=0
  if [ -n "$w" ]; then
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      pstat "$p"
      [ "$pp" = "$w" ] && [ "$pg" = "$p" ] || continue
      kill -"$sig" -"$p" 2>/dev/null && n=$((n+1))
    done
  fi
  [ "$n" -gt 0 ] && exit 0
  i=$((i+1)); [ "$i" -gt 40 ] && exit 1; sleep 0.05
done`

// Run runs spec as an exec in the sandbox. spec.Session must live under
// the sessions root; spec.Workspace, if set, under the started workspace.
func (s *Sandbox) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	if len(spec.Command) == 0 {
		return nil, &sandbox.Error{Backend: "docker", Op: "run", Err: errors.New("empty command")}
	}
	if spec.TTY != nil || spec.Arg0 != "" {
		if err := sandbox.CheckSpecSupport(s, spec); err != nil {
			return nil, err
		}
	}
	var in sandbox.SessionDirs
	for _, m := range []struct {
		host string
		dst  *string
	}{
		{spec.Session.Root, &in.Root}, {spec.Session.Bin, &in.Bin}, {spec.Session.Calls, &in.Calls},
		{spec.Session.Responses, &in.Responses}, {spec.Session.Tmp, &in.Tmp},
	} {
		p, err := s.inside(m.host)
		if err != nil {
			return nil, &sandbox.Error{Backend: "docker", Op: "map session", Err: err,
				Help: "create sessions under the sessions root given to `gatebridge sandbox start`"}
		}
		*m.dst = p
	}
	if in.Tmp == "" {
		return nil, &sandbox.Error{Backend: "docker", Op: "map session", Err: errors.New("session has no tmp dir")}
	}
	workdir := "/"
	if s.workspace != "" {
		workdir = s.b.cfg.WorkspacePath
	}
	if spec.Workspace != "" {
		in, ok := s.WorkspaceInside(spec.Workspace)
		if !ok {
			return nil, &sandbox.Error{Backend: "docker", Op: "map workspace",
				Err:  fmt.Errorf("workspace %s is not under the sandbox's workspace %q", spec.Workspace, s.workspace),
				Help: "start the sandbox with that workspace"}
		}
		workdir = in
	}
	workdir, err := spec.WorkDir(workdir)
	if err != nil {
		return nil, &sandbox.Error{Backend: "docker", Op: "run", Err: err}
	}
	if spec.WorkspaceWritable && !s.wsWritable {
		return nil, &sandbox.Error{Backend: "docker", Op: "map workspace", Err: errors.New("the sandbox's workspace is read-only"),
			Help: "start the sandbox with --writable-workspace"}
	}
	if err := s.prepareSession(ctx, spec.Session); err != nil {
		return nil, &sandbox.Error{Backend: "docker", Op: "prepare session", Err: err}
	}

	env := s.b.env(spec, in)
	if s.agentDir != "" {
		return s.runAgent(ctx, spec, env, workdir)
	}
	var sessPath string
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			sessPath, env[i] = v, "PATH="+DefaultPath
		}
	}
	token := randToken()
	_, gid, _ := parseUser(s.user)
	lease, err := s.b.makeLease(ctx, spec.Session.Root, gid)
	if err != nil {
		return nil, err
	}
	leaseIn := ""
	if lease != nil {
		defer func() { lease.Close(); os.Remove(lease.Name()) }()
		leaseIn = path.Join(in.Root, filepath.Base(lease.Name()))
	}
	cmd := append([]string{"/bin/sh", "-c", execWrapper, "gatebridge-exec-" + token, sessPath, leaseIn}, spec.Command...)

	start := time.Now()
	bg := context.WithoutCancel(ctx)
	cctx, cancel := cleanupCtx(ctx)
	ex, err := s.b.cli.ExecCreate(cctx, s.id, client.ExecCreateOptions{
		User: s.user, AttachStdin: spec.Stdin != nil, AttachStdout: true, AttachStderr: true,
		Env: env, WorkingDir: workdir, Cmd: cmd,
	})
	cancel()
	if err != nil {
		return nil, s.execError("create exec", err)
	}
	att, err := s.b.cli.ExecAttach(bg, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, s.execError("start exec", err)
	}
	defer att.Close()

	out, copied := pump(&att.HijackedResponse, spec)
	signal := func(sig string) {
		kctx, cancel := cleanupCtx(ctx)
		defer cancel()
		k, err := s.b.cli.ExecCreate(kctx, s.id, client.ExecCreateOptions{
			User: s.user, Env: []string{"PATH=" + DefaultPath}, WorkingDir: "/",
			Cmd: []string{"/bin/sh", "-c", execKill, "gatebridge-kill", token, sig},
		})
		if err == nil {
			_, _ = s.b.cli.ExecStart(kctx, k.ID, client.ExecStartOptions{Detach: true})
		}
	}
	st := sandbox.NewStopper(ctx, spec, func() { signal("TERM") }, func() { signal("KILL") })
	defer st.Close()
	var hard <-chan time.Time
	for done := false; !done; {
		select {
		case <-copied:
			done = true
		case <-st.C():
			st.Step()
			if st.Killed() {
				hard = time.After(5 * time.Second)
			}
		case sig := <-spec.Signals:
			if name := strings.TrimPrefix(unix.SignalName(sig), "SIG"); name != "" {
				go signal(name)
			}
		case <-hard:
			// KILL did not end the exec: stop listening.
			att.Close()
			<-copied
			done = true
		}
	}
	code, err := s.execExit(bg, ex.ID)
	if err != nil && !st.Stopped() {
		return nil, err
	}
	res := out.result(code)
	st.Finish(res)
	res.Duration = time.Since(start)
	res.Info = map[string]string{"image": s.image, "container_id": s.id, "mode": "persistent", "sandbox": s.name}
	return res, nil
}

// execExit waits for the engine to notice the exec ended and returns its
// exit code.
func (s *Sandbox) execExit(ctx context.Context, id string) (int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for delay := time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := s.b.cli.ExecInspect(ictx, id, client.ExecInspectOptions{})
		cancel()
		if err != nil {
			return -1, s.execError("inspect exec", err)
		}
		if !r.Running {
			return r.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, &sandbox.Error{Backend: "docker", Op: "inspect exec", Err: errors.New("exec still running after its output ended")}
		}
		time.Sleep(delay)
	}
}

func (s *Sandbox) execError(op string, err error) error {
	if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "is not running") {
		return &sandbox.Error{Backend: "docker", Op: op, Err: fmt.Errorf("persistent sandbox %s: %w", s.name, err),
			Help: fmt.Sprintf("start it with `gatebridge sandbox start %s` (remove a stopped one with `gatebridge sandbox stop %s`)", s.name, s.name)}
	}
	return engineError(op, err)
}

// prepareSession hands the session to the container user when gatebridge
// is root ([sandbox.GrantSession]): calls/ and tmp/ become writable by it,
// bin/ and responses/ stay the host's and readable by it alone (a POSIX
// ACL; group-readable only on a filesystem without ACLs), never writable,
// which matters here because the whole sessions root is mounted
// read-write.
func (s *Sandbox) prepareSession(ctx context.Context, d sandbox.SessionDirs) error {
	uid, gid, ok := parseUser(s.user)
	if !ok || os.Geteuid() != 0 || uid == 0 {
		return nil
	}
	if err := s.b.grant(ctx, d, uid, gid); err != nil {
		return err
	}
	// Files already in bin/ and responses/ (wrappers, early responses)
	// must not be group- or other-writable either: the group is the
	// container user's.
	for _, dir := range []string{d.Bin, d.Responses} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for i, e := range ents {
			if i >= 4096 {
				break
			}
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 != 0 {
				if err := os.Chmod(filepath.Join(dir, e.Name()), fi.Mode().Perm()&^0o022); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// grantOwners is LabelGrant's value for sessions handed over by
// ownership.
const grantOwners = "owner"

// HostEvents implements [sandbox.EventsReporter] (see [Backend.HostEvents]).
func (s *Sandbox) HostEvents(ctx context.Context) bool { return s.b.HostEvents(ctx) }

// startGrace is how long prune leaves a persistent sandbox that was
// created but is not running yet (a start in progress).
const startGrace = time.Minute

func randToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WorkspaceInside maps a host directory under the sandbox's workspace to
// where the container sees it (the workspace path, or a subdirectory of
// it). ok is false when host is not under the workspace.
func (s *Sandbox) WorkspaceInside(host string) (inside string, ok bool) {
	if s.workspace == "" {
		return "", false
	}
	abs, err := filepath.Abs(host)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(s.workspace, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return path.Join(s.b.cfg.WorkspacePath, filepath.ToSlash(rel)), true
}

func wakeLabel(poll bool) string {
	if poll {
		return "poll"
	}
	return "fifo"
}

var _ sandbox.Warmer = (*Sandbox)(nil)

// Warm dials the sandbox's agent, waiting for it to be up, so that the
// first command does not (a warm pool's sandbox). Without an agent it
// does nothing.
func (s *Sandbox) Warm(ctx context.Context) error {
	if s.agentDir == "" {
		return nil
	}
	_, err := s.agentConn(ctx)
	return err
}

// agentConn is the connection to the sandbox's agent, dialled at the
// first call of this process.
func (s *Sandbox) agentConn(ctx context.Context) (*agent.Conn, error) {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	if s.agent != nil {
		return s.agent, nil
	}
	c, err := agent.Dial(ctx, s.agentDir, agent.DialOptions{})
	if err != nil {
		return nil, &sandbox.Error{Backend: "docker", Op: "run in " + s.name, Err: err,
			Help: fmt.Sprintf("see `docker logs %s%s`; remove it with `gatebridge sandbox stop %s` and start it again", ContainerPrefix, s.name, s.name)}
	}
	s.agent = c
	return c, nil
}

// runAgent runs spec through the sandbox's agent (dialled at the first
// command of this process, or by Warm).
func (s *Sandbox) runAgent(ctx context.Context, spec *sandbox.Spec, env []string, workdir string) (*sandbox.Result, error) {
	c, err := s.agentConn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.Run(ctx, agent.Command{Argv: spec.Command, Env: env, Dir: workdir}, spec)
	if err != nil {
		return nil, err
	}
	res.Info = map[string]string{"image": s.image, "container_id": s.id, "mode": "persistent", "sandbox": s.name, "via": "agent"}
	return res, nil
}
