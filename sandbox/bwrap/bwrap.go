// Package bwrap is the backend that runs each command in bubblewrap
// namespaces ([Backend]); a program offers it with [Register].
package bwrap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/internal/proc"
)

// Backend runs commands in bubblewrap namespaces.
//
// # Isolation
//
// The command runs with every namespace unshared (network: only lo; pid;
// ipc; uts; cgroup; user where the kernel allows), a new session (no
// terminal to push input into), no capabilities even when gatebridge runs
// as root, and a root that holds only: read-only binds of /usr, /bin,
// /sbin and /lib* (symlinks are recreated as symlinks), the /etc entries
// in [Backend.Etc], [Backend.ReadOnly], a fresh /proc and a minimal /dev,
// a tmpfs /tmp, the workspace (read-only unless
// [sandbox.Spec.WorkspaceWritable]) and the session. The session is
// mounted at its host path: Root, bin/ and responses/ read-only, calls/
// and tmp/ read-write. Paths are resolved (symlinks evaluated) on the host
// first, so inside paths equal the canonical host paths, in the env as
// well. In a writable workspace the protected paths
// ([sandbox.Spec.ProtectedPaths]) are mounted read-only over it, each
// directory between the workspace and one of them read-write onto itself
// ([sandbox.ProtectedParents]), both from descriptors gatebridge opened
// without following links, where bwrap has --bind-fd.
//
// # Environment
//
// Only HOME=/tmp, then [sandbox.Spec.Env], then [sandbox.SessionEnv] with
// the base PATH /usr/local/bin:/usr/bin:/bin (or Spec.Env's PATH). The
// environment is given to bwrap as its own environment, which it passes
// on, rather than with --clearenv and --setenv: values stay out of the
// host's process list.
//
// # Processes
//
// Run starts bwrap with --die-with-parent from a goroutine locked to its OS
// thread. Timeout and cancellation send SIGTERM to every process in the
// sandbox's pid namespace and, after the grace, SIGKILL to its init, which
// takes the whole namespace down. When the command exits, bwrap's init exits
// and the kernel kills whatever it left behind: nothing survives Run.
type Backend struct {
	// Path is the bwrap executable; "" looks up "bwrap" in the host PATH.
	Path string
	// Etc lists the /etc entries bound read-only (missing ones are
	// skipped); nil means [DefaultEtc].
	Etc []string
	// ReadOnly lists extra host paths bound read-only at the same path
	// (a toolchain under /opt, say).
	ReadOnly []string
	// Hostname is the host name inside; "" means "gatebridge".
	Hostname string
}

var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Checker    = (*Backend)(nil)
	_ sandbox.TTYRunner  = (*Backend)(nil)
	_ sandbox.Arg0Runner = (*Backend)(nil)
)

// TTYSupport: bwrap runs a command on a pseudo-terminal the host opens
// ([sandbox.Spec.TTY]). That terminal is the session's controlling
// terminal (gatebridge starts bwrap with setsid and TIOCSCTTY), so bwrap
// runs without --new-session then: TIOCSTI reaches only that terminal,
// whose input is the command's own, never gatebridge's terminal.
func (*Backend) TTYSupport() error { return nil }

// Arg0Support: bubblewrap 0.9 and later have --argv0; before, a command
// cannot get its own argv[0] (refused, not ignored).
func (b *Backend) Arg0Support() error {
	bin, err := b.binary()
	if err != nil {
		return err
	}
	if !probeBwrap(context.Background(), bin).argv0 {
		return &sandbox.Error{Backend: "bwrap", Op: "set argv[0]", Err: fmt.Errorf("%s has no --argv0 (bubblewrap 0.9 added it)", bin),
			Help: "start the process without arg0, upgrade bubblewrap to 0.9 or later, or use docker"}
	}
	return nil
}

// DefaultEtc is what of /etc a command usually needs: the dynamic linker
// cache, users and groups, name service and locale configuration, time
// zone, certificates, the alternatives symlinks. Secrets (shadow, ssh,
// sudoers, docker, …) stay out.
var DefaultEtc = []string{
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
	"/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/locale.conf",
	"/etc/default/locale", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
	"/etc/mime.types", "/etc/os-release", "/etc/debian_version", "/etc/inputrc",
	"/etc/gitconfig", "/etc/bash.bashrc", "/etc/profile", "/etc/shells",
}

// systemDirs are bound read-only when they exist.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// bwrapBasePath is PATH inside after the session bin/.
const bwrapBasePath = "/usr/local/bin:/usr/bin:/bin"

// New returns a bwrap backend using the bwrap found in PATH.
func New() *Backend { return &Backend{} }

// Name returns "bwrap".
func (*Backend) Name() string { return Name }

func (b *Backend) binary() (string, error) {
	name := b.Path
	if name == "" {
		name = "bwrap"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", &sandbox.Error{Backend: "bwrap", Op: "find bwrap", Err: fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err),
			Help: "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap, apk add bubblewrap)"}
	}
	return path, nil
}

// Run runs spec.Command in a bubblewrap sandbox (see [Backend] and the
// package contract). A sandbox that bwrap cannot set up is reported as an
// [*sandbox.Error] with a hint, not as the command's exit status.
func (b *Backend) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	if len(spec.Command) == 0 {
		return nil, &sandbox.Error{Backend: "bwrap", Op: "run", Err: errors.New("empty command")}
	}
	if err := sandbox.CheckSpecSupport(b, spec); err != nil {
		return nil, err
	}
	bin, err := b.binary()
	if err != nil {
		return nil, err
	}
	return b.run(ctx, bin, spec)
}

func (b *Backend) run(ctx context.Context, bin string, spec *sandbox.Spec) (*sandbox.Result, error) {
	inside, workspace, err := resolveDirs(spec)
	if err != nil {
		return nil, &sandbox.Error{Backend: "bwrap", Op: "resolve paths", Err: err}
	}
	if _, err := spec.WorkDir(workspace); err != nil && workspace != "" {
		return nil, &sandbox.Error{Backend: "bwrap", Op: "run", Err: err}
	}
	basePath, ok := sandbox.EnvValue(spec.Env, "PATH")
	if !ok {
		basePath = bwrapBasePath
	}
	// TMPDIR is the sandbox's own /tmp tmpfs, size-limited by
	// Limits.TmpSize, not the session's tmp/ on the host.
	envDirs := inside
	envDirs.Tmp = "/tmp"
	env := sandbox.MergeEnv([]string{"HOME=/tmp"}, spec.Env, sandbox.SessionEnv(spec, envDirs, basePath))
	pathList, _ := sandbox.EnvValue(env, "PATH")
	// Everything inside is a host path bound at the same place (or the
	// empty /tmp), so a host lookup tells whether the name exists inside.
	if _, ok := proc.LookPath(spec.Command[0], pathList); !ok {
		return proc.NotFound(spec, spec.Command[0]), nil
	}

	cred, err := bwrapIdentity(spec)
	if err != nil {
		return nil, err
	}
	protected, err := sandbox.ProtectedPaths("bwrap", spec)
	if err != nil {
		return nil, err
	}
	defer sandbox.CleanupProtected(protected)
	if err := sandbox.PrepareProtected("bwrap", protected); err != nil {
		return nil, err
	}
	// Limits: a cgroup the starting thread joins before it forks bwrap.
	cg, cgErr := newLimitCgroup(spec.Limits)
	if noCg := (*noCgroupError)(nil); cgErr != nil && !errors.As(cgErr, &noCg) {
		// The host has the cgroups but they refused these limits: never
		// run the command without the limits it was given.
		return nil, &sandbox.Error{Backend: "bwrap", Op: "set up limits", Err: cgErr,
			Help: "check sandbox.limits (cpus at least 0.01, memory at least a few MiB) and that /sys/fs/cgroup is writable"}
	}
	if cg != nil {
		defer cg.remove()
	}
	prepare := func() error {
		if err := newSessionKeyring(); err != nil {
			return err
		}
		if cg != nil {
			return cg.enter()
		}
		return nil
	}
	var leave func()
	if cg != nil {
		leave = cg.leave
	}

	// The parents of nested protected paths and the protected paths that
	// exist, opened here and handed to bwrap (fd 4, 5, …) to mount.
	feat := probeBwrap(ctx, bin)
	var pins map[string]int
	var pinned []*os.File
	if feat.bindFd && len(protected) > 0 {
		var rels []string
		if rels, pinned, err = sandbox.PinProtected("bwrap", workspace, protected); err != nil {
			return nil, err
		}
		defer func() {
			for _, f := range pinned {
				f.Close()
			}
		}()
		if len(pinned) > 0 {
			pins = map[string]int{}
		}
		for i := range pinned {
			pins[filepath.Join(workspace, rels[i])] = 4 + i
		}
	}

	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, &sandbox.Error{Backend: "bwrap", Op: "create status pipe", Err: err}
	}
	st := newBwrapStatus()
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.read(statusR)
	}()
	if h := bwrapTestHookBeforeStart; h != nil {
		h(workspace)
	}
	args := b.args(spec, inside, workspace, protected, pins, feat)
	res, err := proc.Run(ctx, spec, &proc.Process{
		Backend: "bwrap",
		Path:    bin,
		Args:    args,
		Env:     env,
		Dir:     "/",
		Extra:   append([]*os.File{statusW}, pinned...), // fd 3, then the pins
		Tree:    func(main *os.Process) proc.Tree { return newNSTree(main, st) },
		Cred:    cred,
		Prepare: prepare,
		Started: leave,
	})
	statusW.Close()
	// bwrap and its children are gone, so the pipe is at EOF; the timer
	// only guards against a surprise.
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	statusR.Close()
	<-done
	if err != nil {
		return nil, err
	}
	if res.Info == nil {
		res.Info = map[string]string{}
	}
	res.Info["bwrap"] = bin
	switch {
	case cg != nil:
		res.Info["limits"] = "cgroup v1"
		if msg := cg.report(); msg != "" {
			line := "gatebridge: the command " + msg + "\n"
			if spec.Stderr != nil {
				io.WriteString(spec.Stderr, line)
			}
			res.Stderr = append(res.Stderr, line...)
			res.Info["limit_hit"] = msg
		}
	case cgErr != nil:
		res.Info["limits"] = "not enforced: " + cgErr.Error()
	}
	if !res.TimedOut && !res.Canceled && !st.exited() && res.ExitCode == 1 {
		// bwrap failed before the command could run: mounts, namespaces.
		msg := bwrapMessage(res.Stderr)
		return nil, &sandbox.Error{Backend: "bwrap", Op: "set up sandbox",
			Err: fmt.Errorf("%w: %s", sandbox.ErrUnavailable, msg), Help: diagnose(msg, hostProbe{uid: os.Getuid()})}
	}
	return res, nil
}

// resolveDirs evaluates the symlinks of the session and workspace paths:
// bwrap binds the canonical path, and the env must name the same place.
func resolveDirs(spec *sandbox.Spec) (inside sandbox.SessionDirs, workspace string, err error) {
	eval := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return filepath.EvalSymlinks(abs)
	}
	s := spec.Session
	for _, f := range []struct{ in, out *string }{
		{&s.Root, &inside.Root}, {&s.Bin, &inside.Bin}, {&s.Calls, &inside.Calls},
		{&s.Responses, &inside.Responses}, {&s.Tmp, &inside.Tmp}, {&spec.Workspace, &workspace},
	} {
		if *f.out, err = eval(*f.in); err != nil {
			return sandbox.SessionDirs{}, "", err
		}
	}
	return inside, workspace, nil
}

// args builds bwrap's argv. Order matters: bwrap applies the operations in
// order, so /tmp's tmpfs comes before binds that may live under it, and a
// bind comes before the binds nested inside it.
//
// pins maps a host path (a protected path or a parent of one) to the
// descriptor bwrap has it open as: that one is mounted with --bind-fd or
// --ro-bind-fd rather than by path.
func (b *Backend) args(spec *sandbox.Spec, inside sandbox.SessionDirs, workspace string, protected []sandbox.Protected, pins map[string]int, feat bwrapFeatures) []string {
	hostname := b.Hostname
	if hostname == "" {
		hostname = "gatebridge"
	}
	a := []string{"bwrap", "--unshare-all", "--die-with-parent"}
	if spec.TTY == nil {
		// Without it a command could push input into gatebridge's
		// terminal (TIOCSTI). On a terminal of its own, gatebridge starts
		// bwrap in a new session whose controlling terminal is that one.
		a = append(a, "--new-session")
	}
	a = append(a, "--cap-drop", "ALL", "--hostname", hostname)
	if feat.disableUserns {
		// No user namespace inside: a nested one gives the command every
		// capability over its own mounts and network (a tmpfs of any size
		// past tmp_size, the kernel's namespaced-root attack surface).
		a = append(a, "--unshare-user", "--disable-userns")
	}
	a = append(a, systemArgs()...)
	etc := b.Etc
	if etc == nil {
		etc = DefaultEtc
	}
	for _, e := range etc {
		a = append(a, etcArgs(e)...)
	}
	// bwrap leaves /proc/sys writable when its directory mode hides that
	// (0555 dir, 0644 files): uid 0 inside, which is the host's root when
	// gatebridge runs as root, could then set host-wide sysctls
	// (kernel.core_pattern runs a program as root on the host) without
	// any capability. Bind it read-only over the fresh /proc.
	a = append(a, "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev")
	// The writable scratch space: /tmp (TMPDIR) and /dev/shm (POSIX shared
	// memory, semaphores), each a tmpfs of Limits.TmpSize. The root and
	// /dev, tmpfs bwrap makes, are remounted read-only at the end: both
	// belong to the command's uid and were writable without any bound.
	for _, d := range []string{"/tmp", "/dev/shm"} {
		if spec.Limits.TmpSize > 0 {
			a = append(a, "--size", strconv.FormatInt(spec.Limits.TmpSize, 10))
		}
		a = append(a, "--perms", "01777", "--tmpfs", d)
	}

	type bind struct {
		path string
		rw   bool
	}
	var binds []bind
	add := func(p string, rw bool) {
		if p != "" {
			binds = append(binds, bind{filepath.Clean(p), rw})
		}
	}
	// The parents of nested protected paths, each a mount point of its
	// own so the command cannot rename it away ([sandbox.ProtectedParents]). First,
	// so that an equal path below wins.
	for _, rel := range sandbox.ProtectedParents(protected) {
		add(filepath.Join(workspace, rel), true)
	}
	for _, p := range b.ReadOnly {
		add(p, false)
	}
	add(workspace, spec.WorkspaceWritable)
	add(inside.Root, false)
	add(inside.Bin, false)
	add(inside.Responses, false)
	add(inside.Calls, true)
	// Parents before children; among equal paths the later (stricter
	// session) entry wins.
	sort.SliceStable(binds, func(i, j int) bool { return len(binds[i].path) < len(binds[j].path) })
	bindArgs := func(src string, rw bool) []string {
		fd, ok := pins[src]
		switch {
		case ok && rw:
			return []string{"--bind-fd", strconv.Itoa(fd), src}
		case ok:
			return []string{"--ro-bind-fd", strconv.Itoa(fd), src}
		case rw:
			return []string{"--bind", src, src}
		default:
			return []string{"--ro-bind", src, src}
		}
	}
	for _, bd := range binds {
		a = append(a, bindArgs(bd.path, bd.rw)...)
	}
	// Protected paths go read-only over the writable workspace; a missing
	// one becomes an empty read-only tmpfs so it cannot be created.
	for _, p := range protected {
		dst := filepath.Join(workspace, p.Rel)
		if p.Missing {
			a = append(a, "--perms", "0555", "--size", "4096", "--tmpfs", dst, "--remount-ro", dst)
		} else {
			a = append(a, bindArgs(dst, false)...)
		}
	}
	dir, _ := spec.WorkDir(workspace) // checked by Run
	if dir == "" {
		dir = "/tmp"
	}
	a = append(a, "--remount-ro", "/dev", "--remount-ro", "/")
	a = append(a, "--chdir", dir, "--json-status-fd", "3")
	if spec.Arg0 != "" && feat.argv0 {
		a = append(a, "--argv0", spec.Arg0)
	}
	a = append(a, "--")
	return append(a, spec.Command...)
}

// bwrapIdentity is who bwrap runs as. Not root, gatebridge starts bwrap as
// itself. As root it starts bwrap as spec.UID:spec.GID (65534 when that is
// 0), with no supplementary groups, after handing it the session: the
// command never runs as the host's uid 0 unless spec.AllowRoot, so nothing
// it writes (a setuid copy of sh, a device node) is root's on the host.
func bwrapIdentity(spec *sandbox.Spec) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	uid, gid := spec.UID, spec.GID
	if uid == 0 && spec.AllowRoot {
		return nil, nil
	}
	if uid == 0 {
		uid, gid = NobodyUID, NobodyUID
	}
	// Group 0 is root's too: the command could leave a setgid-root copy
	// of sh in a writable workspace.
	if gid == 0 && !spec.AllowRoot {
		return nil, &sandbox.Error{Backend: "bwrap", Op: "identity", Err: fmt.Errorf("refusing to run the command as %d:0 (gid 0 is root's group)", uid),
			Help: "set sandbox.gid to a non-root gid, or sandbox.allow_root: true if you accept the danger"}
	}
	if err := sandbox.GrantSession(spec.Session, uid, gid); err != nil {
		return nil, &sandbox.Error{Backend: "bwrap", Op: "prepare session", Err: err}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// systemArgs binds the system directories that exist read-only, and
// recreates those that are symlinks (/bin -> usr/bin) as symlinks.
func systemArgs() []string {
	var a []string
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	return a
}

// etcArgs binds one /etc entry read-only, hiding what is in it that is not
// world-readable (/etc/ssl/private, say): those are covered by an empty
// tmpfs (directories) or /dev/null (files). Missing entries are skipped.
func etcArgs(e string) []string {
	fi, err := os.Lstat(e)
	if err != nil {
		return nil
	}
	if fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o004 == 0 {
		return nil // not world-readable: leave it out entirely
	}
	a := []string{"--ro-bind-try", e, e}
	if !fi.IsDir() {
		return a
	}
	filepath.WalkDir(e, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == e {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode().Perm()&0o004 == 0 || (d.IsDir() && info.Mode().Perm()&0o001 == 0) {
			if d.IsDir() {
				a = append(a, "--tmpfs", p, "--remount-ro", p)
				return filepath.SkipDir
			}
			a = append(a, "--ro-bind", "/dev/null", p)
		}
		return nil
	})
	return a
}

// NobodyUID is the uid (and gid) a sandboxed command runs as when
// gatebridge is root and no other identity is configured.
const NobodyUID = 65534

// bwrapFeatures are the options of the installed bwrap that args uses when
// present.
type bwrapFeatures struct {
	disableUserns bool // --disable-userns (bubblewrap 0.8)
	bindFd        bool // --bind-fd and --ro-bind-fd (bubblewrap 0.5)
	bindData      bool // --ro-bind-data
	argv0         bool // --argv0 (bubblewrap 0.9)
}

var bwrapProbes struct {
	mu   sync.Mutex
	done map[string]bwrapFeatures
}

// probeBwrap reads bin's --help once per process.
func probeBwrap(ctx context.Context, bin string) bwrapFeatures {
	bwrapProbes.mu.Lock()
	defer bwrapProbes.mu.Unlock()
	if f, ok := bwrapProbes.done[bin]; ok {
		return f
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--help").Output()
	if err != nil && len(out) == 0 {
		return bwrapFeatures{} // not cached: try again next time
	}
	f := bwrapFeatures{disableUserns: bytes.Contains(out, []byte("--disable-userns")),
		bindFd: bytes.Contains(out, []byte("--ro-bind-fd")), bindData: bytes.Contains(out, []byte("--ro-bind-data")),
		argv0: bytes.Contains(out, []byte("--argv0"))}
	if bwrapProbes.done == nil {
		bwrapProbes.done = map[string]bwrapFeatures{}
	}
	bwrapProbes.done[bin] = f
	return f
}

// bwrapStatus is what bwrap reports on --json-status-fd.
type bwrapStatus struct {
	mu       sync.Mutex
	childPid int           // bwrap's child: the init of the pid namespace
	pidNS    uint64        // inode of the pid namespace
	exit     bool          // the command ran and exited ("exit-code" seen)
	known    chan struct{} // closed once pidNS is known or never will be
	once     sync.Once
}

func newBwrapStatus() *bwrapStatus { return &bwrapStatus{known: make(chan struct{})} }

// bwrapTestHookBeforeStart, set by tests only, runs after the checks of
// the protected paths and before bwrap starts (and mounts them).
var bwrapTestHookBeforeStart func(workspace string)

// bwrapStatusDelay holds up reading bwrap's status (tests: a loaded host).
var bwrapStatusDelay atomic.Int64

func (s *bwrapStatus) read(r io.Reader) {
	defer s.once.Do(func() { close(s.known) }) // the status ended: no more to wait for
	if d := bwrapStatusDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var m struct {
			ChildPid *int    `json:"child-pid"`
			PidNS    *uint64 `json:"pid-namespace"`
			ExitCode *int    `json:"exit-code"`
		}
		if err := dec.Decode(&m); err != nil {
			return
		}
		s.mu.Lock()
		if m.ChildPid != nil {
			s.childPid = *m.ChildPid
		}
		if m.PidNS != nil {
			s.pidNS = *m.PidNS
			s.once.Do(func() { close(s.known) })
		}
		if m.ExitCode != nil {
			s.exit = true
		}
		s.mu.Unlock()
	}
}

func (s *bwrapStatus) ns() (childPid int, pidNS uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.childPid, s.pidNS
}

// waitNS waits at most d for the pid namespace to be known. bwrap reports
// it before the command starts, but this process reads the report on
// another goroutine: a signal for a command that has just printed its
// first line must not find it unread.
func (s *bwrapStatus) waitNS(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.known:
	case <-t.C:
	}
}

func (s *bwrapStatus) exited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}

// bwrapMessage returns bwrap's own error lines from stderr.
func bwrapMessage(stderr []byte) string {
	var lines []string
	for _, l := range bytes.Split(stderr, []byte("\n")) {
		if s, ok := strings.CutPrefix(string(l), "bwrap: "); ok {
			lines = append(lines, s)
		}
	}
	if len(lines) == 0 {
		s := strings.TrimSpace(string(stderr))
		if s == "" {
			return "bwrap exited with status 1"
		}
		return s
	}
	return strings.Join(lines, "; ")
}

// hostProbe reads what diagnose needs to know about the host; tests replace
// it.
type hostProbe struct {
	readFile func(string) ([]byte, error)
	exists   func(string) bool
	uid      int
}

func (p hostProbe) read(name string) string {
	rf := p.readFile
	if rf == nil {
		rf = os.ReadFile
	}
	b, err := rf(name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (p hostProbe) has(name string) bool {
	if p.exists != nil {
		return p.exists(name)
	}
	_, err := os.Stat(name)
	return err == nil
}

func (p hostProbe) inContainer() bool {
	if p.has("/.dockerenv") || p.has("/run/.containerenv") {
		return true
	}
	cg := p.read("/proc/1/cgroup")
	for _, k := range []string{"docker", "kubepods", "containerd", "lxc", "libpod"} {
		if strings.Contains(cg, k) {
			return true
		}
	}
	return false
}

// diagnose explains a bwrap failure message with a hint.
func diagnose(msg string, p hostProbe) string {
	userns := strings.Contains(msg, "uid map") || strings.Contains(msg, "gid map") ||
		strings.Contains(msg, "new namespace") || strings.Contains(msg, "creating new namespace") ||
		strings.Contains(msg, "setting up uid") || strings.Contains(msg, "user namespace")
	switch {
	case p.read("/proc/sys/user/max_user_namespaces") == "0":
		return "user namespaces are disabled (user.max_user_namespaces = 0): " +
			"sysctl -w user.max_user_namespaces=15000, or use --sandbox docker"
	case p.read("/proc/sys/kernel/unprivileged_userns_clone") == "0" && p.uid != 0:
		return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): " +
			"sysctl -w kernel.unprivileged_userns_clone=1, or use --sandbox docker"
	case p.read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" && p.uid != 0 && userns:
		return "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): " +
			"install an AppArmor profile that allows userns for bwrap, e.g. /etc/apparmor.d/bwrap containing\n" +
			"  abi <abi/4.0>, include <tunables/global>\n" +
			"  profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }\n" +
			"then apparmor_parser -r /etc/apparmor.d/bwrap; or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	case p.inContainer():
		return "gatebridge seems to run inside a container that forbids namespaces or mounts: " +
			"use --sandbox docker from the host, run the container with --privileged " +
			"(or seccomp and AppArmor unconfined), or use --sandbox local"
	case userns:
		return "bwrap cannot create namespaces here: check that user namespaces are enabled " +
			"(sysctl user.max_user_namespaces) and that no security module blocks them"
	case strings.Contains(msg, "No such file or directory") || strings.Contains(msg, "Can't mkdir"):
		return "a path to mount is missing or lies under a read-only system directory: " +
			"check the workspace and session paths"
	default:
		return "run `bwrap --unshare-all --ro-bind / / true` to investigate"
	}
}

// bwrapChecks caches Check per bwrap binary for the life of the process.
var bwrapChecks struct {
	mu   sync.Mutex
	done map[string]error
}

// Check runs `true` in a sandbox set up the way Run sets it up and explains
// a failure (bwrap missing, user namespaces disabled, AppArmor's userns
// restriction, an unprivileged container). The result is cached per bwrap
// binary for the life of the process.
func (b *Backend) Check(ctx context.Context) error {
	bin, err := b.binary()
	if err != nil {
		return err
	}
	key := bin + "\x00" + fmt.Sprint(b.Etc, b.ReadOnly)
	bwrapChecks.mu.Lock()
	defer bwrapChecks.mu.Unlock()
	if err, ok := bwrapChecks.done[key]; ok {
		return err
	}
	err = b.check(ctx, bin)
	if ctx.Err() == nil {
		if bwrapChecks.done == nil {
			bwrapChecks.done = map[string]error{}
		}
		bwrapChecks.done[key] = err
	}
	return err
}

func (b *Backend) check(ctx context.Context, bin string) error {
	var stderr bytes.Buffer
	res, err := b.run(ctx, bin, &sandbox.Spec{
		Command:   []string{"true"},
		Stderr:    &stderr,
		Timeout:   5 * time.Second,
		KillGrace: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	switch {
	case res.Canceled:
		return &sandbox.Error{Backend: "bwrap", Op: "check", Err: ctx.Err()}
	case res.TimedOut:
		return &sandbox.Error{Backend: "bwrap", Op: "check", Err: fmt.Errorf("%w: `bwrap … true` timed out", sandbox.ErrUnavailable),
			Help: "bwrap hangs on this machine: run `bwrap --unshare-all --ro-bind / / true` to investigate"}
	case res.ExitCode != 0:
		msg := bwrapMessage(res.Stderr)
		return &sandbox.Error{Backend: "bwrap", Op: "check",
			Err: fmt.Errorf("%w: `bwrap … true` exited %d: %s", sandbox.ErrUnavailable, res.ExitCode, msg), Help: diagnose(msg, hostProbe{uid: os.Getuid()})}
	}
	return nil
}

var _ sandbox.FactsReporter = (*Backend)(nil)

// Facts: no network (a network namespace of its own), a fresh tmpfs /tmp
// for every command.
func (b *Backend) Facts() sandbox.Facts { return sandbox.Facts{} }
