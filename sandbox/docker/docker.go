// Package docker is the docker [sandbox.Backend]: each command runs in a
// fresh, labelled, network-less container ([Backend]) or as an exec in a
// long-lived one ([Sandbox], see [Backend.Start]).
//
// # Mounts
//
// The session directory is mounted at [Config.SessionPath]
// (/gatebridge/session): the root read-only, calls/ read-write, bin/ and
// responses/ read-only, so the container can neither write nor replace
// them; the session's tmp/ is not used (TMPDIR is the container's /tmp). The workspace is mounted at /workspace, read-only unless
// [sandbox.Spec.WorkspaceWritable]; it is the working directory. /tmp is a
// tmpfs, the root filesystem is read-only, all capabilities are dropped.
//
// # Users
//
// When gatebridge runs as a non-root user the container runs as the same
// uid:gid, so the host can remove whatever the command wrote. As root it
// runs as [sandbox.Spec.UID]:[sandbox.Spec.GID] (the CLI picks the
// workspace owner, else 65534), never as 0 unless [sandbox.Spec.AllowRoot];
// the private session is handed to that user with [sandbox.GrantSession].
// [Config.User] overrides the identity (0 is still refused without
// AllowRoot).
//
// # Cleanup
//
// Every container carries the labels io.gatebridge.owner=gatebridge,
// io.gatebridge.session, io.gatebridge.pid and io.gatebridge.host, is
// force-removed on every path out of Run (with a fresh context, so a
// cancelled ctx does not skip it), and [Backend.Prune] removes those whose
// owning process is gone.
package docker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

var _ sandbox.Backend = (*Backend)(nil)
var _ sandbox.Checker = (*Backend)(nil)
var _ sandbox.EventsReporter = (*Backend)(nil)
var _ sandbox.EventsReporter = (*Sandbox)(nil)

// Labels set on every container.
const (
	LabelOwner      = "io.gatebridge.owner" // always OwnerValue
	LabelSession    = "io.gatebridge.session"
	LabelPID        = "io.gatebridge.pid"   // pid of the gatebridge process that owns it
	LabelStart      = "io.gatebridge.start" // its start time (/proc/PID/stat), so a reused pid is not the owner
	LabelHost       = "io.gatebridge.host"  // hostname of that process
	LabelPersistent = "io.gatebridge.persistent"
	OwnerValue      = "gatebridge"
)

// Defaults for [Config] fields left zero.
const (
	DefaultPath          = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	DefaultSessionPath   = "/gatebridge/session"
	DefaultWorkspacePath = "/workspace"
	DefaultMemory        = 512 << 20
	DefaultNanoCPUs      = 1_000_000_000
	DefaultPidsLimit     = 256
	DefaultNetwork       = "none"
	DefaultTmpfsSize     = 64 << 20
	// NobodyUser is the container user when gatebridge runs as root.
	NobodyUser = "65534:65534"
)

// Wake modes for [Config.Wake].
const (
	WakeAuto = ""     // poll on Docker Desktop or a non-Linux host, else FIFO
	WakePoll = "poll" // always make the wrappers poll
	WakeFIFO = "fifo" // leave the session's wake mode
)

// Config configures a [Backend]. The zero value of every field means the
// default named in its comment; booleans are phrased so false is the safe
// default.
type Config struct {
	// Image to run; default [TestImage]. Run never pulls; Check and Start
	// do ([Backend.EnsureImage]).
	Image string
	// DefaultImage is the operator's image, always allowed by Images;
	// default Image. [Entry]'s New sets it to the configured image before
	// an image asked for ([sandbox.Settings].Image) replaces Image.
	DefaultImage string
	// Images is the allowlist (config sandbox.docker.images): exact
	// references, or "REPO:*" for any tag or digest of a repository,
	// compared normalised ([NormalizeImage]); DefaultImage is always
	// allowed. Empty allows any image. With a list, New refuses an image
	// outside it ([sandbox.ErrImageRefused]) and runs the normalised
	// reference.
	Images []string
	// Pull is [PullMissing] (default: pull an image that is not present)
	// or [PullNever].
	Pull string
	// PullTimeout bounds a pull; default [DefaultPullTimeout].
	PullTimeout time.Duration
	// Runtime is the OCI runtime the engine runs containers with (runc,
	// runsc for gVisor, crun, kata, …): a name the engine has registered
	// ("" the engine's default). See [Backend.Runtimes].
	Runtime string
	// User is the container user as "uid:gid"; default the host uid:gid,
	// or [NobodyUser] when gatebridge runs as root.
	User string
	// Memory limit in bytes; default 512 MiB; -1 for none.
	Memory int64
	// NanoCPUs is the CPU quota in 1e-9 CPUs; default 1 CPU; -1 for none.
	NanoCPUs int64
	// PidsLimit caps processes in the container; default 256; -1 for none.
	PidsLimit int64
	// Network is the network mode; default "none" (only lo).
	Network string
	// TmpfsSize is the size of the /tmp tmpfs in bytes; default 64 MiB.
	TmpfsSize int64
	// WritableRootfs leaves the image's root filesystem writable; default
	// read-only.
	WritableRootfs bool
	// AllowNewPrivileges drops no-new-privileges; default set.
	AllowNewPrivileges bool
	// CapAdd lists capabilities kept; default none (ALL dropped).
	CapAdd []string
	// NoInit runs the command as PID 1; default docker-init reaps zombies
	// and forwards signals.
	NoInit bool
	// SessionPath is where the session is mounted inside; default
	// /gatebridge/session.
	SessionPath string
	// WorkspacePath is where the workspace is mounted inside and the
	// working directory; default /workspace.
	WorkspacePath string
	// Wake is WakeAuto (default), WakePoll or WakeFIFO.
	Wake string
	// ProbeCache is a file where measurements of OCI runtimes are kept
	// ([Backend.ProbeRuntime]), so that each is measured once, not at every
	// run; "" measures once per Backend.
	ProbeCache string
	// Labels are added to every container (Spec.Labels too).
	Labels map[string]string
	// Client talks to the engine; default client.New(client.FromEnv)
	// (DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH, …) with API
	// version negotiation, closed by [Backend.Close].
	Client client.APIClient
	// PullProgress receives pull progress ([Backend.EnsureImage]);
	// default os.Stderr.
	PullProgress io.Writer
	// Agent is the host path of a statically linked gatebridge binary.
	// Set, persistent sandboxes run it read-only as their entrypoint
	// (`gatebridge agent`, package sandbox/agent) and run each command
	// through it: no exec API, a process start's cost. [AgentSh] runs the
	// agent in the image's /bin/sh instead (needs setsid there, as the
	// exec API's wrapper does). "" (or FIFOs that do not reach the
	// container: Docker Desktop) keeps the exec API.
	Agent string
}

// withDefaults fills the fields left zero (-1 keeps meaning none).
func (c Config) withDefaults() Config {
	c.Image = cmp.Or(c.Image, TestImage)
	c.DefaultImage = cmp.Or(c.DefaultImage, c.Image)
	c.Pull = cmp.Or(c.Pull, PullMissing)
	c.PullTimeout = cmp.Or(c.PullTimeout, DefaultPullTimeout)
	c.Memory = cmp.Or(c.Memory, DefaultMemory)
	c.NanoCPUs = cmp.Or(c.NanoCPUs, DefaultNanoCPUs)
	c.PidsLimit = cmp.Or(c.PidsLimit, DefaultPidsLimit)
	c.Network = cmp.Or(c.Network, DefaultNetwork)
	c.TmpfsSize = cmp.Or(c.TmpfsSize, DefaultTmpfsSize)
	c.SessionPath = cmp.Or(c.SessionPath, DefaultSessionPath)
	c.WorkspacePath = cmp.Or(c.WorkspacePath, DefaultWorkspacePath)
	if c.PullProgress == nil {
		c.PullProgress = os.Stderr
	}
	return c
}

// Backend runs each command in a fresh container. It is safe for
// concurrent use.
type Backend struct {
	cfg        Config
	cli        client.APIClient
	ownsClient bool
	policy     *imagePolicy // Config.Images; nil allows any image

	factsMu sync.Mutex
	engine  *engineFacts // nil or with err: ask again (facts)

	crossMu  sync.Mutex
	crossSet bool
	cross    Crossing
	crossErr error

	stageOnce sync.Once
	stage     bool // protected paths are staged (stageProtected)
}

// New returns a Backend. It does not contact the engine; [Backend.Check]
// does.
func New(cfg Config) (*Backend, error) {
	cfg = cfg.withDefaults()
	switch cfg.Wake {
	case WakeAuto, WakePoll, WakeFIFO:
	default:
		return nil, fmt.Errorf("docker: unknown wake mode %q", cfg.Wake)
	}
	if cfg.User != "" {
		if _, _, ok := parseUser(cfg.User); !ok {
			return nil, fmt.Errorf("docker: user %q is not uid:gid", cfg.User)
		}
	}
	switch cfg.Pull {
	case PullMissing, PullNever:
	default:
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: fmt.Errorf("sandbox.docker.pull: unknown policy %q", cfg.Pull),
			Help: "use missing (pull an image that is not present) or never"}
	}
	if cfg.PullTimeout < 0 {
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: errors.New("sandbox.docker.pull_timeout: must not be negative"),
			Help: "a duration such as 10m (0: the default)"}
	}
	policy, err := newImagePolicy(cfg.DefaultImage, cfg.Images)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "configure", Err: err,
			Help: "list exact references (ubuntu:24.04, registry.example/team/img@sha256:…) or REPO:* for any tag or digest of a repository"}
	}
	// Refused here, before anything reaches the engine; an allowed one
	// runs normalised, so the engine cannot read it as another image.
	if cfg.Image, err = policy.allow(cfg.Image); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, cli: cfg.Client, policy: policy}
	if b.cli == nil {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			return nil, &sandbox.Error{Backend: "docker", Op: "create client", Err: err,
				Help: "check DOCKER_HOST, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY"}
		}
		b.cli, b.ownsClient = cli, true
	}
	return b, nil
}

// Close releases the client when New created it.
func (b *Backend) Close() error {
	if b.ownsClient {
		return b.cli.Close()
	}
	return nil
}

// Name returns "docker".
func (b *Backend) Name() string { return "docker" }

// Config returns the configuration with defaults applied.
func (b *Backend) Config() Config { return b.cfg }

// Client returns the engine client.
func (b *Backend) Client() client.APIClient { return b.cli }

// containerUser returns the user to run as: Config.User, else (as root)
// spec's UID:GID, else our own uid:gid. Root (uid 0) is refused unless
// allowRoot; a zero spec identity without it means 65534 (nobody).
func (b *Backend) containerUser(specUID, specGID int, allowRoot bool) (user string, uid, gid int, err error) {
	switch {
	case b.cfg.User != "":
		uid, gid, _ = parseUser(b.cfg.User)
	case os.Geteuid() != 0:
		uid, gid = os.Geteuid(), os.Getegid()
	case specUID == 0 && !allowRoot:
		uid, gid, _ = parseUser(NobodyUser)
	default:
		uid, gid = specUID, specGID
	}
	if uid == 0 && !allowRoot {
		return "", 0, 0, &sandbox.Error{Backend: "docker", Op: "user", Err: errors.New("refusing to run the command as uid 0 (root)"),
			Help: "set sandbox.docker.user to a non-root uid:gid, or sandbox.allow_root: true if you accept that a container escape is host root"}
	}
	// Group 0 is root's too: the command could leave a setgid-root file
	// in a writable workspace (bind mounts cannot be nosuid). Running as
	// gatebridge's own identity gives it nothing gatebridge lacks.
	if gid == 0 && !allowRoot && (uid != os.Geteuid() || gid != os.Getegid()) {
		return "", 0, 0, &sandbox.Error{Backend: "docker", Op: "user", Err: errors.New("refusing to run the command with gid 0 (root's group)"),
			Help: "set sandbox.docker.user (or sandbox.gid) to a non-root gid, or sandbox.allow_root: true"}
	}
	return fmt.Sprintf("%d:%d", uid, gid), uid, gid, nil
}

func parseUser(s string) (uid, gid int, ok bool) {
	u, g, found := strings.Cut(s, ":")
	if !found {
		g = u
	}
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	return uid, gid, err1 == nil && err2 == nil && uid >= 0 && gid >= 0
}

// ForcePoll reports whether FIFO wake-ups cannot cross into the
// container ([sandbox.WakeForcer]): Config.Wake, or for WakeAuto whether
// the engine is Docker Desktop's (asked once) or the host is not Linux.
func (b *Backend) ForcePoll(ctx context.Context) bool { return b.usePoll(ctx) }

// usePoll reports whether FIFO wake-ups cannot cross into the container
// (Docker Desktop's VM, an OCI runtime measured so: see [Crossing]).
func (b *Backend) usePoll(ctx context.Context) bool {
	c, _ := b.crossing(ctx)
	return !c.FIFO
}

// grant hands a private session to the container user: by ACL, or by
// ownership where the OCI runtime does not honour ACLs.
func (b *Backend) grant(ctx context.Context, d sandbox.SessionDirs, uid, gid int) error {
	if c, _ := b.crossing(ctx); !c.ACL {
		return sandbox.GrantSessionOwners(d, uid, gid)
	}
	return sandbox.GrantSession(d, uid, gid)
}

// HostEvents implements [sandbox.EventsReporter]: false when the host's
// inotify does not see what the OCI runtime's containers write.
func (b *Backend) HostEvents(ctx context.Context) bool {
	c, _ := b.crossing(ctx)
	return c.Events
}

func isDockerDesktop(os string) bool { return strings.Contains(os, "Docker Desktop") }

// env builds the container environment: the session's entries for the
// paths inside, then spec.Env. The wrappers' wake mode is the session's
// (bridge asks [Backend.ForcePoll]).
func (b *Backend) env(spec *sandbox.Spec, inside sandbox.SessionDirs) []string {
	// TMPDIR is the container's own size-limited /tmp tmpfs (tmp_size),
	// not the session's tmp/ on the host: what the command writes there is
	// bounded and charged to the container.
	inside.Tmp = "/tmp"
	return sandbox.MergeEnv(sandbox.SessionEnv(spec, inside, DefaultPath), spec.Env)
}

func (b *Backend) labels(spec *sandbox.Spec, extra map[string]string) map[string]string {
	l := map[string]string{}
	for k, v := range b.cfg.Labels {
		l[k] = v
	}
	for k, v := range extra {
		l[k] = v
	}
	if spec != nil {
		for k, v := range spec.Labels {
			l[k] = v
		}
		if _, ok := l[LabelSession]; !ok && spec.Session.Root != "" {
			l[LabelSession] = filepath.Base(spec.Session.Root)
		}
	}
	host, _ := os.Hostname()
	l[LabelOwner] = OwnerValue
	l[LabelPID] = strconv.Itoa(os.Getpid())
	if st := procStart(os.Getpid()); st != "" {
		l[LabelStart] = st
	}
	l[LabelHost] = host
	return l
}

// The lease: gatebridge holds a FIFO in the session open for writing while
// the container runs; the container's entry script waits on it in the
// background and, when it reads EOF (gatebridge died: kill -9, OOM),
// kills every process of the command, so the container ends with its
// owner, not on a timer. The FIFO is owned by gatebridge and only
// readable by the container user (0440, group gid): a command that could
// open it for writing would hold the lease itself and outlive a dead
// gatebridge. The next gatebridge start removes the stopped
// container (dead-owner labels, [Backend.Prune]). The same script prints
// a shell's "command not found" for an unknown command. It needs /bin/sh
// in the image (the gate wrappers do too).
const (
	leaseName   = "lease" // the mailbox format's FileLease (docker_test checks)
	leaseScript = `l=$1; shift
if [ -p "$l" ] && { exec 9<"$l"; } 2>/dev/null; then
	( read -r _ <&9; kill -KILL -1 ) >/dev/null 2>&1 &
	exec 9<&-
fi
command -v "$1" >/dev/null 2>&1 || { printf 'gatebridge: %s: command not found\n' "$1" >&2; exit 127; }
exec "$@"`
)

// makeLease creates a lease FIFO in the session root (a fresh name per
// run), opens it for writing (O_RDWR never blocks), then leaves it owned
// by gatebridge with group gid and mode 0440: the container user can read
// it but neither open it for writing nor (not being its owner) chmod it.
// When the container runs as gatebridge's own uid it is the owner; the
// per-command mount is read-only, so it cannot chmod it there either.
// nil when there is no session or FIFOs do not reach the engine (Docker
// Desktop: poll mode).
func (b *Backend) makeLease(ctx context.Context, root string, gid int) (*os.File, error) {
	if root == "" || b.usePoll(ctx) {
		return nil, nil
	}
	p := filepath.Join(root, leaseName+"-"+randToken())
	if err := unix.Mkfifo(p, 0o600); err != nil {
		return nil, &sandbox.Error{Backend: "docker", Op: "create lease", Err: err}
	}
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(p)
		return nil, &sandbox.Error{Backend: "docker", Op: "open lease", Err: err}
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(p)
		return nil, &sandbox.Error{Backend: "docker", Op: "hand the lease to the container user", Err: err}
	}
	if gid != os.Getegid() {
		if err := f.Chown(os.Geteuid(), gid); err != nil {
			return fail(err)
		}
	}
	if err := f.Chmod(0o440); err != nil {
		return fail(err)
	}
	return f, nil
}

// protectedMounts mounts each protected path read-only over the writable
// workspace ws at wsInside: an existing one bound to itself, a missing one
// as an empty read-only tmpfs so it cannot be created. Before them, each
// directory between the workspace and a nested protected path is bound
// read-write onto itself: a mount point, which the command cannot rename
// away with the protected path in it ([sandbox.ProtectedParents]). The
// engine mounts parents before children whatever the order here.
func protectedMounts(ps []sandbox.Protected, ws, wsInside string, staged map[string]string) []mount.Mount {
	src := func(p string) string {
		if s, ok := staged[p]; ok {
			return s
		}
		return p
	}
	var out []mount.Mount
	for _, rel := range sandbox.ProtectedParents(ps) {
		out = append(out, bind(src(filepath.Join(ws, rel)), path.Join(wsInside, filepath.ToSlash(rel)), false))
	}
	for _, p := range ps {
		dst := path.Join(wsInside, filepath.ToSlash(p.Rel))
		if p.Missing {
			out = append(out, mount.Mount{Type: mount.TypeTmpfs, Target: dst, ReadOnly: true,
				TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 4096, Mode: 0o555}})
		} else {
			out = append(out, bind(src(p.Host), dst, true))
		}
	}
	return out
}

func bind(src, dst string, ro bool) mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro}
}

// hostConfig is a container's host side. It needs to know which engine
// it talks to (Podman gets podmanUlimits): when the engine does not say,
// it is an error, not a container configured for the wrong engine.
func (b *Backend) hostConfig(ctx context.Context, mounts []mount.Mount) (*container.HostConfig, error) {
	f := b.facts(ctx)
	if f.err != nil {
		return nil, engineError("ask the engine what it is", f.err)
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(b.cfg.Network),
		ReadonlyRootfs: !b.cfg.WritableRootfs,
		CapDrop:        []string{"ALL"},
		CapAdd:         b.cfg.CapAdd,
		Mounts:         mounts,
		Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", b.cfg.TmpfsSize)},
		LogConfig:      container.LogConfig{Type: "none"},
		Runtime:        b.cfg.Runtime,
	}
	if !b.cfg.AllowNewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges"}
	}
	if !b.cfg.NoInit {
		t := true
		hc.Init = &t
	}
	if b.cfg.Memory > 0 {
		hc.Memory = b.cfg.Memory
		hc.MemorySwap = b.cfg.Memory // no swap on top
	}
	if b.cfg.NanoCPUs > 0 {
		hc.NanoCPUs = b.cfg.NanoCPUs
	}
	if b.cfg.PidsLimit > 0 {
		p := b.cfg.PidsLimit
		hc.PidsLimit = &p
	}
	if f.podman {
		hc.Ulimits = podmanUlimits()
		if f.rootless && os.Geteuid() != 0 {
			// Our uid is the same uid inside, so the session (ours,
			// 0700) is the container user's, as under docker.
			hc.UsernsMode = "keep-id"
		}
	}
	return hc, nil
}

// podmanUlimits are the rlimits a container gets under Podman. Without
// them Podman asks for its own maximums (1048576 open files), which a
// host with lower hard limits refuses ("error setting rlimit …
// operation not permitted"): these fit under any usual hard limit, and
// under ours.
func podmanUlimits() []*container.Ulimit {
	lim := func(res int, name string, soft, hard int64) *container.Ulimit {
		var rl unix.Rlimit
		if unix.Getrlimit(res, &rl) == nil && rl.Max != unix.RLIM_INFINITY {
			hard = min(hard, int64(rl.Max))
			soft = min(soft, hard)
		}
		return &container.Ulimit{Name: name, Soft: soft, Hard: hard}
	}
	return []*container.Ulimit{
		lim(unix.RLIMIT_NOFILE, "nofile", 1024, 4096),
		lim(unix.RLIMIT_NPROC, "nproc", 4096, 4096),
	}
}

// withLimits applies the spec's limits over the backend's defaults.
func withLimits(hc *container.HostConfig, l sandbox.Limits) *container.HostConfig {
	if l.TmpSize > 0 {
		hc.Tmpfs["/tmp"] = fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", l.TmpSize)
	}
	if l.Memory > 0 {
		hc.Memory, hc.MemorySwap = l.Memory, l.Memory
	}
	if l.Pids > 0 {
		p := l.Pids
		hc.PidsLimit = &p
	}
	if l.CPUs > 0 {
		hc.NanoCPUs = int64(l.CPUs * 1e9)
	}
	return hc
}

// cleanupCtx is a short context that survives the caller's cancellation.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// Run runs spec in a new container and removes it (see the package doc and
// the [sandbox.Backend] contract).
func (b *Backend) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	if len(spec.Command) == 0 {
		return nil, &sandbox.Error{Backend: "docker", Op: "run", Err: errors.New("empty command")}
	}
	if spec.TTY != nil || spec.Arg0 != "" {
		if err := sandbox.CheckSpecSupport(b, spec); err != nil {
			return nil, err
		}
	}
	user, uid, gid, err := b.containerUser(spec.UID, spec.GID, spec.AllowRoot)
	if err != nil {
		return nil, err
	}
	if err := b.checkLimits(ctx, max(b.cfg.Memory, spec.Limits.Memory), max(b.cfg.NanoCPUs, int64(spec.Limits.CPUs*1e9)), max(b.cfg.PidsLimit, spec.Limits.Pids)); err != nil {
		return nil, err
	}
	if err := b.grant(ctx, spec.Session, uid, gid); err != nil {
		return nil, &sandbox.Error{Backend: "docker", Op: "prepare session", Err: err}
	}
	inside := spec.Session.Rebase(b.cfg.SessionPath)
	var mounts []mount.Mount
	if spec.Session.Root != "" {
		mounts = append(mounts, bind(spec.Session.Root, inside.Root, true))
	}
	for _, m := range []struct {
		src, dst string
		ro       bool
	}{
		{spec.Session.Bin, inside.Bin, true},
		{spec.Session.Responses, inside.Responses, true},
		{spec.Session.Calls, inside.Calls, false},
	} {
		if m.src != "" {
			mounts = append(mounts, bind(m.src, m.dst, m.ro))
		}
	}
	protected, err := sandbox.ProtectedPaths("docker", spec)
	if err != nil {
		return nil, err
	}
	defer sandbox.CleanupProtected(protected)
	if err := sandbox.PrepareProtected("docker", protected); err != nil {
		return nil, err
	}
	staged, unstage, err := b.stageProtected(ctx, spec.Workspace, protected)
	if err != nil {
		return nil, err
	}
	defer unstage()
	workdir := "/"
	if spec.Workspace != "" {
		mounts = append(mounts, bind(spec.Workspace, b.cfg.WorkspacePath, !spec.WorkspaceWritable))
		mounts = append(mounts, protectedMounts(protected, spec.Workspace, b.cfg.WorkspacePath, staged)...)
		workdir = b.cfg.WorkspacePath
	}
	if workdir, err = spec.WorkDir(workdir); err != nil {
		return nil, &sandbox.Error{Backend: "docker", Op: "run", Err: err}
	}
	cfg := &container.Config{
		Image:        b.cfg.Image,
		User:         user,
		Env:          b.env(spec, inside),
		Cmd:          spec.Command,
		Entrypoint:   []string{},
		WorkingDir:   workdir,
		Labels:       b.labels(spec, nil),
		AttachStdout: true,
		AttachStderr: true,
	}
	lease, err := b.makeLease(ctx, spec.Session.Root, gid)
	if err != nil {
		return nil, err
	}
	if lease != nil {
		defer func() { lease.Close(); os.Remove(lease.Name()) }()
		cfg.Entrypoint = []string{"/bin/sh", "-c", leaseScript, "gatebridge-lease", path.Join(inside.Root, filepath.Base(lease.Name()))}
	}
	if spec.Stdin != nil {
		cfg.AttachStdin, cfg.OpenStdin, cfg.StdinOnce = true, true, true
	}
	hc, err := b.hostConfig(ctx, mounts)
	if err != nil {
		return nil, err
	}
	hc = b.scalePids(ctx, withLimits(hc, spec.Limits))
	if spec.TTY != nil {
		// docker's own terminal: made by the runtime inside the
		// container, its controlling terminal; the host's is not involved.
		cfg.Tty = true
		hc.ConsoleSize = [2]uint{uint(spec.TTY.Rows), uint(spec.TTY.Cols)}
		// Engines before API 1.42 ignore ConsoleSize and size the
		// terminal only when resized after the start, after the command
		// may have asked: set it inside first.
		cfg.Cmd = append([]string{"/bin/sh", "-c", ttySizeScript, "gatebridge-tty",
			strconv.Itoa(int(spec.TTY.Rows)), strconv.Itoa(int(spec.TTY.Cols))}, spec.Command...)
	}

	if testHookBeforeCreate != nil {
		testHookBeforeCreate(spec.Workspace)
	}
	start := time.Now()
	// Create with a context the caller cannot cancel: a create that
	// succeeds after we stopped listening would leak the container.
	cctx, cancel := cleanupCtx(ctx)
	created, err := b.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	cancel()
	if err != nil {
		return nil, b.createError(err)
	}
	id := created.ID
	defer b.remove(ctx, id)

	res, err := b.attachStartWait(ctx, id, spec, unstage)
	if err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	res.Info = map[string]string{"image": b.cfg.Image, "container_id": id}
	return res, nil
}

// testHookBeforeCreate, set by tests only, runs between the checks of a
// run's (or a persistent sandbox's) protected paths and the creation of
// its container: where another sandbox writing the same workspace would
// swap a checked directory for a link.
var testHookBeforeCreate func(workspace string)

// remove force-removes container id with a cleanup context of its own. A
// container already gone, or already being removed (say by a concurrent
// `sandbox prune`), counts as removed.
func (b *Backend) remove(ctx context.Context, id string) error {
	rctx, cancel := cleanupCtx(ctx)
	defer cancel()
	_, err := b.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || cerrdefs.IsNotFound(err) ||
		cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress") {
		return nil
	}
	return err
}

func (b *Backend) createError(err error) error {
	if cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "image") {
		return &sandbox.Error{Backend: "docker", Op: "create container",
			Err:  fmt.Errorf("%w: image %s not found locally: %w", sandbox.ErrImageMissing, b.cfg.Image, err),
			Help: imageHint(b.cfg.Image)}
	}
	return engineError("create container", err)
}

func imageHint(image string) string {
	h := fmt.Sprintf("provide image %s locally: ", image)
	if n, err := NormalizeImage(image); image == TestImage || err == nil && n == "docker.io/library/"+TestImage {
		h += "run `make test-image` (go run ./sandbox/docker/testimage), or "
	}
	return h + "`docker load -i IMAGE.tar`, or pick another with --image"
}

// engineError wraps an engine failure with a hint about reaching it.
func engineError(op string, err error) error {
	e := &sandbox.Error{Backend: "docker", Op: op, Err: err}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "permission denied"):
		e.Err = fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
		e.Help = "no permission on the docker socket: add your user to the `docker` group (then log in again) or set DOCKER_HOST"
	case client.IsErrConnectionFailed(err) || strings.Contains(msg, "connect"):
		e.Err = fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
		e.Help = "is the docker engine running? set DOCKER_HOST to its socket (e.g. unix:///var/run/docker.sock)"
	}
	return e
}

// attachStartWait attaches, registers the wait, starts the container,
// streams output and enforces timeout and cancellation. started runs once
// the engine has answered the start (the container has its mounts).
func (b *Backend) attachStartWait(ctx context.Context, id string, spec *sandbox.Spec, started func()) (*sandbox.Result, error) {
	bg := context.WithoutCancel(ctx)
	att, err := b.cli.ContainerAttach(bg, id, client.ContainerAttachOptions{
		Stream: true, Stdin: spec.Stdin != nil, Stdout: true, Stderr: true,
	})
	if err != nil {
		return nil, engineError("attach container", err)
	}
	defer att.Close()
	waitCtx, stopWait := context.WithCancel(bg)
	defer stopWait()
	wait := b.cli.ContainerWait(waitCtx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})

	sctx, cancel := cleanupCtx(ctx)
	_, err = b.cli.ContainerStart(sctx, id, client.ContainerStartOptions{})
	cancel()
	started()
	if err != nil {
		if isNotFound(err) { // only without docker-init, which exits 127 itself
			return notFound(spec), nil
		}
		return nil, startError(err)
	}

	out, copied := pump(&att.HijackedResponse, spec)

	kill := func(sig string) {
		kctx, cancel := cleanupCtx(ctx)
		defer cancel()
		_, _ = b.cli.ContainerKill(kctx, id, client.ContainerKillOptions{Signal: sig})
	}
	st := sandbox.NewStopper(ctx, spec, func() { kill("TERM") }, func() { kill("KILL") })
	defer st.Close()

	var code int
	for done := false; !done; {
		select {
		case r := <-wait.Result:
			if r.Error != nil && r.Error.Message != "" {
				return nil, engineError("wait for container", errors.New(r.Error.Message))
			}
			code, done = int(r.StatusCode), true
		case err := <-wait.Error:
			return nil, engineError("wait for container", err)
		case <-st.C():
			st.Step()
		case sig := <-spec.Signals:
			b.signalAll(ctx, id, sig)
		case sz := <-spec.Resize:
			rctx, cancel := cleanupCtx(ctx)
			_, _ = b.cli.ContainerResize(rctx, id, client.ContainerResizeOptions{Height: uint(sz.Rows), Width: uint(sz.Cols)})
			cancel()
		}
	}
	// The container has exited: its output ends promptly.
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		att.Close()
		<-copied
	}
	res := out.result(code)
	st.Finish(res)
	return res, nil
}

// signalAll sends sig to every process of container id (sandbox.Spec.Signals):
// `kill -SIG -1` run inside as the container's user reaches every process
// but the caller and pid 1; pid 1 is docker-init, which passes the signal it
// gets on to the command, or, with NoInit, the command itself: it gets the
// signal from the engine.
func (b *Backend) signalAll(ctx context.Context, id string, sig syscall.Signal) {
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if name == "" {
		return
	}
	kctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if b.cfg.NoInit {
		_, _ = b.cli.ContainerKill(kctx, id, client.ContainerKillOptions{Signal: name})
	}
	k, err := b.cli.ExecCreate(kctx, id, client.ExecCreateOptions{
		Env: []string{"PATH=" + DefaultPath}, WorkingDir: "/",
		Cmd: []string{"/bin/sh", "-c", `kill -"$1" -1 2>/dev/null; :`, "gatebridge-signal", name},
	})
	if err == nil {
		_, _ = b.cli.ExecStart(kctx, k.ID, client.ExecStartOptions{Detach: true})
	}
}

// isNotFound reports a start failure because Command[0] does not exist.
func isNotFound(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory")
}

// notFound is the Result of a command that is not in the image's PATH.
func notFound(spec *sandbox.Spec) *sandbox.Result {
	msg := []byte("gatebridge: " + spec.Command[0] + ": command not found\n")
	if spec.Stderr != nil {
		_, _ = spec.Stderr.Write(msg)
	}
	return &sandbox.Result{ExitCode: sandbox.ExitNotFound, Stdout: []byte{}, Stderr: msg}
}

func startError(err error) error {
	e := engineError("start container", err).(*sandbox.Error)
	if e.Help == "" && strings.Contains(err.Error(), "executable file not found") {
		e.Help = "the command is not in the image's PATH"
	}
	return e
}

// streams tees output into the live writers and head+tail captures.
type streams struct {
	outCap, errCap *sandbox.Capture
	stdout, stderr io.Writer
	tini           *tiniFilter
}

func newStreams(spec *sandbox.Spec) *streams {
	s := &streams{outCap: sandbox.NewCapture(spec.MaxOutput), errCap: sandbox.NewCapture(spec.MaxOutput)}
	s.stdout, s.stderr = io.Writer(s.outCap), io.Writer(s.errCap)
	if spec.Stdout != nil {
		s.stdout = io.MultiWriter(s.outCap, liveWriter{spec.Stdout})
	}
	if spec.Stderr != nil {
		s.stderr = io.MultiWriter(s.errCap, liveWriter{spec.Stderr})
	}
	s.tini = &tiniFilter{w: s.stderr}
	s.stderr = s.tini
	return s
}

// tiniFilter rewrites the init's own message for a command that cannot be
// executed ("[FATAL tini (7)] exec nosuchcmd failed: No such file or
// directory", always the first bytes of stderr) into the shell's wording,
// "gatebridge: nosuchcmd: command not found", as under bwrap and local.
// Anything else passes through unchanged.
type tiniFilter struct {
	w    io.Writer
	buf  []byte
	done bool
}

var tiniExecFailed = regexp.MustCompile(`^\[FATAL tini \(\d+\)\] exec (.*) failed: (.*)\n$`)

func (f *tiniFilter) Write(p []byte) (int, error) {
	if f.done {
		return f.w.Write(p)
	}
	f.buf = append(f.buf, p...)
	const prefix = "[FATAL tini ("
	n := min(len(f.buf), len(prefix))
	if string(f.buf[:n]) != prefix[:n] || len(f.buf) > 1024 {
		f.flush()
		return len(p), nil
	}
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		line, rest := f.buf[:i+1], f.buf[i+1:]
		if m := tiniExecFailed.FindSubmatch(line); m != nil {
			why := "command not found"
			if !bytes.Contains(m[2], []byte("No such file")) {
				why = strings.ToLower(string(m[2]))
			}
			line = []byte("gatebridge: " + string(m[1]) + ": " + why + "\n")
		}
		f.done = true
		f.w.Write(line)
		if len(rest) > 0 {
			f.w.Write(rest)
		}
		f.buf = nil
	}
	return len(p), nil
}

// flush writes what is held back (the stream ended mid-prefix).
func (f *tiniFilter) flush() {
	f.done = true
	if len(f.buf) > 0 {
		f.w.Write(f.buf)
		f.buf = nil
	}
}

// liveWriter never fails, so a broken live writer does not stop capture.
type liveWriter struct{ w io.Writer }

func (l liveWriter) Write(p []byte) (int, error) {
	_, _ = l.w.Write(p)
	return len(p), nil
}

func (s *streams) result(code int) *sandbox.Result {
	s.tini.flush()
	r := &sandbox.Result{
		ExitCode:      code,
		Stdout:        s.outCap.Bytes(),
		Stderr:        s.errCap.Bytes(),
		StdoutDropped: s.outCap.Dropped(),
		StderrDropped: s.errCap.Dropped(),
	}
	r.Truncated = r.StdoutDropped > 0 || r.StderrDropped > 0
	return r
}

// pump demultiplexes an attached connection into spec's streams and
// forwards spec.Stdin; copied is closed when the output ends. The stdin
// goroutine ends when Stdin returns EOF or an error; closing the connection
// after exit makes its next write fail.
func pump(att *client.HijackedResponse, spec *sandbox.Spec) (out *streams, copied <-chan struct{}) {
	out = newStreams(spec)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if spec.TTY != nil { // one raw stream
			_, _ = io.Copy(out.stdout, att.Reader)
			return
		}
		_, _ = stdcopy.StdCopy(out.stdout, out.stderr, att.Reader)
	}()
	if spec.Stdin != nil && spec.TTY != nil {
		go typeTTY(att.Conn, spec.Stdin)
	} else if spec.Stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, spec.Stdin)
			if cw, ok := att.Conn.(client.CloseWriter); ok {
				_ = cw.CloseWrite()
			}
		}()
	}
	return out, done
}

// typeTTY types what in gives at a container's terminal, then its end as
// the terminal's end-of-file character, Ctrl-D (twice when the last line
// has no newline: the first one only ends that line). The connection's
// write side stays open: closing it would end the terminal's input at
// once, before the command has read what was typed.
func typeTTY(w io.Writer, in io.Reader) {
	buf := make([]byte, 32<<10)
	last := byte('\n')
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			last = buf[n-1]
		}
		if err != nil {
			break
		}
	}
	if last != '\n' {
		w.Write([]byte{4})
	}
	w.Write([]byte{4})
}

var _ sandbox.TTYRunner = (*Backend)(nil)

// TTYSupport: a container of its own runs on docker's own terminal
// (Config.Tty), sized at the create and resized through the engine.
func (b *Backend) TTYSupport() error { return nil }

// ttySizeScript sizes the container's terminal ($1 rows, $2 columns)
// before it runs the command (the rest).
const ttySizeScript = `stty rows "$1" cols "$2" 2>/dev/null; shift 2; exec "$@"`
