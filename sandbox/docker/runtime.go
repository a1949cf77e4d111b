package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// OCI runtimes
//
// The engine runs each container with an OCI runtime: runc (the host
// kernel, namespaces and cgroups), crun (the same), runsc (gVisor: a
// user-space kernel between the command and the host's), Kata (a VM).
// [Config.Runtime] picks one the engine has registered. A runtime that
// does not share the host kernel may not carry every trick the mailbox
// uses across the bind mount, so gatebridge measures each such runtime
// once ([Backend.ProbeRuntime]) and adapts: wrappers poll when a FIFO
// does not cross, the host scans calls/ when its inotify does not see
// the container's writes, and sessions are handed over by ownership when
// POSIX ACLs are not honoured inside.

// ErrUnknownRuntime is the configured OCI runtime not being registered
// with the engine.
var ErrUnknownRuntime = errors.New("unknown OCI runtime")

// Crossing is how a session bind-mounted into a container of one OCI
// runtime crosses the boundary.
type Crossing struct {
	// FIFO: a byte the host writes to a wake FIFO wakes a reader inside;
	// false makes the wrappers poll (and there is no lease, no agent).
	FIFO bool `json:"fifo"`
	// Events: the host's inotify sees a file made inside; false makes the
	// host scan calls/ on a timer.
	Events bool `json:"events"`
	// ACL: a POSIX ACL entry for the container user is honoured inside;
	// false hands sessions over by ownership ([sandbox.GrantSessionOwners]).
	ACL bool `json:"acl"`
	// HostTasks is how many host tasks (threads, processes) one process
	// inside costs, by which the pids limit is scaled: 1 on the host's
	// kernel; gVisor's sentry (ptrace platform) runs a stub process per
	// address space besides its own threads (about 10 host tasks per
	// process measured here), and when the host's pids cgroup refuses it
	// one the whole sandbox ends (exit 2), not one fork.
	HostTasks int `json:"host_tasks,omitempty"`
}

// gVisorHostTasks scales the pids limit under gVisor (see
// [Crossing.HostTasks]): 100 sleeping processes held 988 host tasks here.
const gVisorHostTasks = 16

// hostKernel is what runc-like runtimes give: the host's own kernel
// behind the bind mount.
var hostKernel = Crossing{FIFO: true, Events: true, ACL: true, HostTasks: 1}

// RuntimeReport is what gatebridge found about one OCI runtime by running
// a container under it ([Backend.ProbeRuntime]).
type RuntimeReport struct {
	Name    string   `json:"name"`
	Path    string   `json:"path,omitempty"` // as the engine registered it
	Args    []string `json:"args,omitempty"`
	Default bool     `json:"default,omitempty"` // the engine's default runtime
	// Err is set when no container could run under it (the engine's
	// words); nothing else is then known.
	Err string `json:"error,omitempty"`
	Crossing
	// Poll: a file the host makes is seen inside (wrappers can poll).
	Poll bool `json:"poll"`
	// Kernel is `uname -r` inside; GVisor is set when dmesg says gVisor.
	Kernel string `json:"kernel,omitempty"`
	GVisor bool   `json:"gvisor,omitempty"`
	// StartMS is the time from the start request to the first file the
	// container wrote; FIFOMS and PollMS how long a host write took to be
	// seen inside through each.
	StartMS float64 `json:"start_ms"`
	FIFOMS  float64 `json:"fifo_ms,omitempty"`
	PollMS  float64 `json:"poll_ms,omitempty"`
	// Measured is when; Key names the engine and runtime it holds for.
	Measured time.Time `json:"measured"`
	Key      string    `json:"key"`
}

// scalePids scales the pids limit of hc by what one process costs the
// host under the OCI runtime ([Crossing.HostTasks]).
func (b *Backend) scalePids(ctx context.Context, hc *container.HostConfig) *container.HostConfig {
	c, _ := b.crossing(ctx)
	if hc.PidsLimit != nil && *hc.PidsLimit > 0 && c.HostTasks > 1 {
		p := *hc.PidsLimit * int64(c.HostTasks)
		hc.PidsLimit = &p
	}
	return hc
}

// Usable says why the mailbox cannot work under the runtime ("" when it
// can).
func (r RuntimeReport) Usable() string {
	switch {
	case r.Err != "":
		return "a container cannot run under it: " + r.Err
	case !r.FIFO && !r.Poll:
		return "the container sees neither a FIFO wake-up nor a file the host writes"
	}
	return ""
}

// Wake is the wrappers' wake mode under the runtime: "fifo" or "poll".
func (r RuntimeReport) Wake() string { return wakeLabel(!r.FIFO) }

// engineFacts is what the backend learned from the engine, once.
type engineFacts struct {
	err       error
	os        string
	id        string
	version   string
	podman    bool
	defaultRT string
	runtimes  map[string]system.RuntimeWithStatus
	rootless  bool
	cgroupsV1 bool
}

// factsTimeout bounds each request facts makes. Podman's /info is slow
// when many requests arrive at once (seconds, not milliseconds); each
// request has a budget of its own, so a slow /info cannot starve /version.
const factsTimeout = 30 * time.Second

// facts asks the engine (GET /version, GET /info) once per Backend; an
// answer with err set is not kept, so the next call asks again. Which
// engine it is must be known, not guessed: a Podman taken for dockerd
// gets no rlimits of ours (podmanUlimits) and asks for its own maximums,
// and every container then fails to start (Podman answers the attach
// with a bare 409, "error setting rlimit … operation not permitted").
func (b *Backend) facts(ctx context.Context) *engineFacts {
	b.factsMu.Lock()
	defer b.factsMu.Unlock()
	if b.engine != nil && b.engine.err == nil {
		return b.engine
	}
	b.engine = b.askFacts(ctx)
	return b.engine
}

func (b *Backend) askFacts(ctx context.Context) *engineFacts {
	f := &engineFacts{}
	// Not the caller's cancellation: other callers share the answer.
	bg := context.WithoutCancel(ctx)
	vctx, cancel := context.WithTimeout(bg, factsTimeout)
	v, err := b.cli.ServerVersion(vctx, client.ServerVersionOptions{})
	cancel()
	if err != nil {
		f.err = fmt.Errorf("GET /version: %w", err)
		return f
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			f.podman = true
		}
	}
	ictx, cancel := context.WithTimeout(bg, factsTimeout)
	res, err := b.cli.Info(ictx, client.InfoOptions{})
	cancel()
	if err != nil {
		f.err = fmt.Errorf("GET /info: %w", err)
		return f
	}
	info := res.Info
	f.os, f.id, f.version = info.OperatingSystem, info.ID, info.ServerVersion
	f.defaultRT, f.cgroupsV1 = info.DefaultRuntime, info.CgroupVersion == "1"
	f.runtimes = map[string]system.RuntimeWithStatus{}
	for k, v := range info.Runtimes {
		f.runtimes[k] = v
	}
	for _, o := range info.SecurityOptions {
		if strings.Contains(o, "name=rootless") {
			f.rootless = true
		}
	}
	// Podman 4.3 says nothing of rootless in /info: its rootless
	// service listens on a socket its (non-root) user owns.
	if f.podman && !f.rootless {
		if sock, ok := strings.CutPrefix(b.cli.DaemonHost(), "unix://"); ok {
			if fi, err := os.Stat(sock); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
					f.rootless = true
				}
			}
		}
	}
	return f
}

// runtimeNames are the engine's runtimes, sorted.
func (f *engineFacts) runtimeNames() []string {
	names := slices.Sorted(maps.Keys(f.runtimes))
	return names
}

// runtimeName is the OCI runtime containers run with: the configured one,
// else the engine's default.
func (b *Backend) runtimeName(f *engineFacts) string {
	if b.cfg.Runtime != "" {
		return b.cfg.Runtime
	}
	return f.defaultRT
}

// isHostKernel reports a runtime known to run containers on the host's
// own kernel, where every crossing works (runc and crun, under any of
// their names).
func isHostKernel(name string, rt system.RuntimeWithStatus) bool {
	for _, s := range []string{name, filepath.Base(rt.Path)} {
		switch s {
		case "runc", "crun", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux":
			return true
		}
	}
	return false
}

// checkRuntime refuses an OCI runtime the engine has not registered, and
// one that Podman's Docker-compatible API would ignore.
func (b *Backend) checkRuntime(ctx context.Context) error {
	if b.cfg.Runtime == "" {
		return nil
	}
	f := b.facts(ctx)
	if f.err != nil {
		return engineError("ask the engine for its OCI runtimes", f.err)
	}
	if _, ok := f.runtimes[b.cfg.Runtime]; !ok {
		return &sandbox.Error{Backend: Name, Op: "choose OCI runtime",
			Err: fmt.Errorf("%w %q: the engine has %s", ErrUnknownRuntime, b.cfg.Runtime, strings.Join(f.runtimeNames(), ", ")),
			Help: "set sandbox.docker.runtime (--runtime) to one of them, or register " + b.cfg.Runtime +
				" with the engine (\"runtimes\" in /etc/docker/daemon.json, then SIGHUP dockerd)"}
	}
	if f.podman && b.cfg.Runtime != f.defaultRT {
		return &sandbox.Error{Backend: Name, Op: "choose OCI runtime",
			Err:  fmt.Errorf("Podman's Docker-compatible API ignores a container's OCI runtime (it would run %q with %s, its default)", b.cfg.Runtime, f.defaultRT),
			Help: "set runtime = \"" + b.cfg.Runtime + "\" under [engine] in the containers.conf of the podman service, or leave sandbox.docker.runtime empty"}
	}
	return nil
}

// crossing is how sessions cross into this backend's containers: known
// for runc-like runtimes, measured for the others (once, and remembered
// in [Config.ProbeCache]). err is set when the runtime cannot run the
// mailbox at all.
func (b *Backend) crossing(ctx context.Context) (Crossing, error) {
	b.crossMu.Lock()
	defer b.crossMu.Unlock()
	if !b.crossSet {
		b.cross, b.crossErr = b.measureCrossing(ctx)
		b.crossSet = true
	}
	c := b.cross
	switch b.cfg.Wake {
	case WakePoll:
		c.FIFO = false
	case WakeFIFO:
		c.FIFO = true
	}
	return c, b.crossErr
}

// setCrossing records what a persistent sandbox's labels say.
func (b *Backend) setCrossing(c Crossing) {
	b.crossMu.Lock()
	defer b.crossMu.Unlock()
	if !b.crossSet {
		b.cross, b.crossSet = c, true
	}
}

func (b *Backend) measureCrossing(ctx context.Context) (Crossing, error) {
	if runtime.GOOS != "linux" {
		return Crossing{Events: true, ACL: true, HostTasks: 1}, nil
	}
	f := b.facts(ctx)
	if f.err != nil {
		return hostKernel, nil // the run itself will say the engine is unreachable
	}
	if isDockerDesktop(f.os) {
		return Crossing{Events: true, ACL: true, HostTasks: 1}, nil
	}
	name := b.runtimeName(f)
	rt, ok := f.runtimes[name]
	if name == "" || !ok || isHostKernel(name, rt) {
		return hostKernel, nil
	}
	r, err := b.cachedProbe(ctx, f, name)
	if err != nil {
		// Cannot tell: the slow but safe ways.
		return Crossing{Events: false, ACL: false, HostTasks: gVisorHostTasks}, err
	}
	if why := r.Usable(); why != "" {
		return Crossing{}, &sandbox.Error{Backend: Name, Op: "use OCI runtime " + name,
			Err:  fmt.Errorf("%w: %s", sandbox.ErrUnavailable, why),
			Help: "see `gatebridge doctor`; pick another with sandbox.docker.runtime (--runtime)"}
	}
	return r.Crossing, nil
}

// probeKey names what a measurement holds for: the engine, the runtime's
// name, path and arguments.
func probeKey(f *engineFacts, name string) string {
	rt := f.runtimes[name]
	return strings.Join(append([]string{f.id, f.version, name, rt.Path}, rt.Args...), "\x1f")
}

// probed are this process's measurements, by probeKey: every Backend
// (serve makes one per sandbox) measures a runtime once.
var probed sync.Map

// cachedProbe is ProbeRuntime, remembered in this process and in
// Config.ProbeCache.
func (b *Backend) cachedProbe(ctx context.Context, f *engineFacts, name string) (RuntimeReport, error) {
	key := probeKey(f, name)
	if r, ok := probed.Load(key); ok {
		return r.(RuntimeReport), nil
	}
	if r, ok := readProbeCache(b.cfg.ProbeCache)[key]; ok {
		probed.Store(key, r)
		return r, nil
	}
	r, err := b.ProbeRuntime(ctx, name)
	if err != nil {
		return r, err
	}
	probed.Store(key, r)
	writeProbeCache(b.cfg.ProbeCache, r)
	return r, nil
}

const maxProbeCache = 256 << 10

func readProbeCache(path string) map[string]RuntimeReport {
	m := map[string]RuntimeReport{}
	if path == "" {
		return m
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return m
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxProbeCache+1))
	if err != nil || len(data) > maxProbeCache {
		return m
	}
	var list []RuntimeReport
	if json.Unmarshal(data, &list) != nil {
		return map[string]RuntimeReport{}
	}
	for _, r := range list {
		m[r.Key] = r
	}
	return m
}

// writeProbeCache adds r to the cache file (temp file and rename; best
// effort: a failure only means measuring again next time).
func writeProbeCache(path string, r RuntimeReport) {
	if path == "" {
		return
	}
	m := readProbeCache(path)
	m[r.Key] = r
	list := make([]RuntimeReport, 0, len(m))
	for _, v := range m {
		list = append(list, v)
	}
	slices.SortFunc(list, func(a, b RuntimeReport) int { return b.Measured.Compare(a.Measured) })
	if len(list) > 32 {
		list = list[:32]
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".oci-runtimes-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

// Probe files, written inside (by the script) or by the host.
const (
	probeMade, probeACL, probeKernel, probeDmesg  = "made", "acl", "kernel", "dmesg"
	probeFIFOOpen, probeFIFOWoke, probeFIFONo     = "fifo-open", "fifo-woke", "fifo-refused"
	probeHost, probeHostSeen, probeDone, probeWak = "host", "host-seen", "done", "wake"
	probePath, probeACLPath                       = "/gatebridge/probe", "/gatebridge/probe-acl"
	probeTimeout                                  = 30 * time.Second
)

// probeScript is what the probe container runs (as the container user,
// with the image's /bin/sh): it writes a file the host watches for, tries
// the ACL-only directory, opens the wake FIFO in the background and
// blocks on it, then waits for a file the host makes.
const probeScript = `p=$1 a=$2
: > "$p/made"
{ true < "$a/responses/r" && true > "$a/calls/w"; } 2>/dev/null && : > "$p/acl"
uname -r > "$p/kernel" 2>/dev/null
{ dmesg | head -n 3; } > "$p/dmesg" 2>/dev/null
( if command exec 3<>"$p/wake"; then : > "$p/fifo-open"; read -r _ <&3; : > "$p/fifo-woke"; else : > "$p/fifo-refused"; fi ) 2>/dev/null &
n=0; while [ ! -e "$p/host" ] && [ "$n" -lt 1000 ]; do n=$((n+1)); sleep 0.01; done
[ -e "$p/host" ] && : > "$p/host-seen"
n=0; while [ ! -e "$p/done" ] && [ "$n" -lt 1000 ]; do n=$((n+1)); sleep 0.01; done`

// ProbeRuntime runs one container under the OCI runtime name, the way
// commands run (the backend's image, user, limits and mounts), and
// measures what crosses its bind mounts: a file it writes (the host's
// inotify), a FIFO wake-up, a file the host writes (polling), a POSIX
// ACL; and what kernel it sees. A container that cannot run is a report
// with Err set; err is for failures on the host's side.
func (b *Backend) ProbeRuntime(ctx context.Context, name string) (RuntimeReport, error) {
	f := b.facts(ctx)
	r := RuntimeReport{Name: name, Measured: time.Now().UTC()}
	if f.err != nil {
		return r, engineError("ask the engine for its OCI runtimes", f.err)
	}
	rt := f.runtimes[name]
	r.Path, r.Args, r.Default, r.Key = rt.Path, rt.Args, name == f.defaultRT, probeKey(f, name)

	user, uid, gid, err := b.containerUser(0, 0, false)
	if err != nil {
		return r, err
	}
	// On the tmpfs sessions live on, where there is one; private (0700,
	// MkdirTemp), removed at the end.
	parent := os.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		parent = "/dev/shm"
	}
	top, err := os.MkdirTemp(parent, "gatebridge-probe-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(top)
	ar := filepath.Join(top, "a")
	p, a := filepath.Join(top, "p"), sandbox.SessionDirs{Root: ar, Bin: filepath.Join(ar, "bin"),
		Calls: filepath.Join(ar, "calls"), Responses: filepath.Join(ar, "responses"), Tmp: filepath.Join(ar, "tmp")}
	for _, d := range []string{p, a.Root, a.Bin, a.Calls, a.Responses, a.Tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return r, err
		}
	}
	// p: the container user's own, as calls/ is. a: a session granted the
	// usual way (an ACL entry where the filesystem has them).
	if err := os.Chown(p, uid, gid); err != nil && os.Geteuid() == 0 {
		return r, err
	}
	if err := unix.Mkfifo(filepath.Join(p, probeWak), 0o600); err != nil {
		return r, err
	}
	if err := os.Lchown(filepath.Join(p, probeWak), uid, gid); err != nil && os.Geteuid() == 0 {
		return r, err
	}
	if err := sandbox.GrantSession(a, uid, gid); err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(a.Responses, "r"), []byte("r"), 0o640); err != nil {
		return r, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return r, err
	}
	defer func() { go w.Close() }() // closing an inotify fd can block for ms
	if err := w.Add(p); err != nil {
		return r, err
	}
	evMade := make(chan struct{})
	go func() {
		closed := false
		for ev := range w.Events {
			if filepath.Base(ev.Name) == probeMade && !closed {
				close(evMade)
				closed = true
			}
		}
	}()

	hc, err := b.hostConfig(ctx, []mount.Mount{bind(p, probePath, false), bind(a.Root, probeACLPath, true),
		bind(a.Calls, probeACLPath+"/calls", false)})
	if err != nil {
		return r, err
	}
	hc.Runtime = name
	cfg := &container.Config{
		Image: b.cfg.Image, User: user, Env: []string{"PATH=" + DefaultPath}, WorkingDir: "/",
		Entrypoint: []string{"/bin/sh", "-c", probeScript, "gatebridge-probe", probePath, probeACLPath},
		Labels:     b.labels(nil, map[string]string{"io.gatebridge.probe": name}),
	}
	cctx, cancel := cleanupCtx(ctx)
	created, err := b.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	cancel()
	if err != nil {
		if cerr := b.createError(err); errors.Is(cerr, sandbox.ErrImageMissing) {
			return r, cerr
		}
		r.Err = engineMessage(err)
		return r, nil
	}
	defer b.remove(ctx, created.ID)
	start := time.Now()
	sctx, cancel := cleanupCtx(ctx)
	_, err = b.cli.ContainerStart(sctx, created.ID, client.ContainerStartOptions{})
	cancel()
	if err != nil {
		r.Err = engineMessage(err)
		return r, nil
	}
	exists := func(n string) bool { _, err := os.Lstat(filepath.Join(p, n)); return err == nil }
	waitFor := func(limit time.Duration, names ...string) (string, time.Duration) {
		t0 := time.Now()
		for time.Since(t0) < limit && ctx.Err() == nil {
			for _, n := range names {
				if exists(n) {
					return n, time.Since(t0)
				}
			}
			time.Sleep(time.Millisecond)
		}
		return "", time.Since(t0)
	}
	if n, _ := waitFor(probeTimeout, probeMade); n == "" {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		r.Err = fmt.Sprintf("the container wrote nothing in %v", probeTimeout)
		return r, nil
	}
	r.StartMS = ms(time.Since(start))
	select {
	case <-evMade:
		r.Events = true
	case <-time.After(500 * time.Millisecond):
	}
	// The FIFO: the container opens it and blocks reading; one byte from
	// here must wake it.
	if n, _ := waitFor(5*time.Second, probeFIFOOpen, probeFIFONo); n == probeFIFOOpen {
		t0 := time.Now()
		if fd, err := unix.Open(filepath.Join(p, probeWak), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			_, _ = unix.Write(fd, []byte("\n"))
			unix.Close(fd)
			if n, _ := waitFor(2*time.Second, probeFIFOWoke); n != "" {
				r.FIFO, r.FIFOMS = true, ms(time.Since(t0))
			}
		}
	}
	t0 := time.Now()
	if err := os.WriteFile(filepath.Join(p, probeHost), nil, 0o644); err != nil {
		return r, err
	}
	if n, _ := waitFor(3*time.Second, probeHostSeen); n != "" {
		r.Poll, r.PollMS = true, ms(time.Since(t0))
	}
	r.ACL = exists(probeACL) || os.Geteuid() != 0 || uid == os.Geteuid()
	r.HostTasks = 1
	if k, err := os.ReadFile(filepath.Join(p, probeKernel)); err == nil {
		r.Kernel = strings.TrimSpace(string(k))
	}
	if d, err := os.ReadFile(filepath.Join(p, probeDmesg)); err == nil {
		r.GVisor = strings.Contains(string(d), "gVisor")
	}
	if r.GVisor {
		r.HostTasks = gVisorHostTasks
	}
	_ = os.WriteFile(filepath.Join(p, probeDone), nil, 0o644)
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// engineMessage is the engine's own words in err, without the client's
// "Error response from daemon: " prefix.
func engineMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "Error response from daemon: ")
}

// Runtimes measures every OCI runtime the engine has registered (Podman:
// its default, the only one its Docker-compatible API uses), sorted by
// name, and remembers the measurements in [Config.ProbeCache].
func (b *Backend) Runtimes(ctx context.Context) ([]RuntimeReport, error) {
	f := b.facts(ctx)
	if f.err != nil {
		return nil, engineError("ask the engine for its OCI runtimes", f.err)
	}
	names := f.runtimeNames()
	if f.podman {
		names = []string{f.defaultRT}
	}
	var out []RuntimeReport
	for _, n := range names {
		r, err := b.ProbeRuntime(ctx, n)
		if err != nil {
			return out, err
		}
		if r.Err == "" {
			probed.Store(r.Key, r)
			writeProbeCache(b.cfg.ProbeCache, r)
		}
		out = append(out, r)
	}
	return out, nil
}

// ErrLimitsUnenforced is resource limits configured where the engine
// cannot set them: rootless Podman on a cgroup v1 host.
var ErrLimitsUnenforced = errors.New("resource limits cannot be enforced")

// checkLimits refuses limits the engine would silently not apply:
// rootless Podman on a cgroup v1 host runs the container in no cgroup of
// its own (it warns and goes on), so memory, pids and CPU limits would not
// hold and a fork bomb or a memory hog would reach the user's own limits.
// The /tmp size (a tmpfs option) and the rest hold.
func (b *Backend) checkLimits(ctx context.Context, memory, nanoCPUs, pids int64) error {
	f := b.facts(ctx)
	if !f.podman || !f.rootless || !f.cgroupsV1 || (memory <= 0 && nanoCPUs <= 0 && pids <= 0) {
		return nil
	}
	return &sandbox.Error{Backend: Name, Op: "set resource limits",
		Err: fmt.Errorf("%w: rootless Podman on a cgroup v1 host runs containers without memory, pids and CPU limits", ErrLimitsUnenforced),
		Help: "use rootful Podman or Docker (or a cgroup v2 host), or set sandbox.limits.memory, sandbox.limits.pids and sandbox.limits.cpus to 0 " +
			"to accept running without them (the command is then bounded only by your user's own limits)"}
}
