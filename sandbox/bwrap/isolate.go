package bwrap

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Isolator runs one host program (a gate's: a command gate's command, a
// stdio MCP server) in a bubblewrap sandbox of its own, with no more of
// the host than a [Confinement] lists. This package does not know what a
// gate is: a program adapts Isolate to package gates' Isolator contract,
// which this follows (the threads, the cleanup, failing closed).
//
// # What the program gets
//
// Every namespace unshared (the network too unless [Confinement].Network,
// which keeps the host's: every address the host reaches, its loopback
// services and its abstract Unix sockets), a new session (no terminal to
// push input into), no capabilities, no nested user namespaces (where
// bwrap has --disable-userns), a session keyring of its own (the invoker's
// keys are out of reach), and a root that holds only: read-only binds of
// /usr, /bin, /sbin and /lib*, the /etc entries in Etc (and
// /etc/resolv.conf with the network), ReadOnly, a fresh /proc (/proc/sys
// read-only) and a minimal /dev, a tmpfs /tmp and /dev/shm of
// Limits.TmpSize, the program file read-only, its working directory
// (cmd.Dir) read-only unless it lies in a Write path (with no cmd.Dir it
// starts in /tmp), and the Confinement's Read paths read-only and Write
// paths read-write. Nothing else: not the session directories, not $HOME,
// not the workspace unless listed. The Read and Write paths and cmd.Dir
// must be resolved already (no symlink on the way: one is refused, not
// followed, as it may have been planted since the caller checked the
// path); they are opened and mounted from the descriptor (where bwrap has
// --bind-fd), so a path swapped for a symlink after that is not followed
// either.
//
// The program runs as gatebridge's own uid when that is not root; as root,
// as UID:GID (0 means [GateUID]), never as root, with no supplementary
// groups: it reads only what that uid may read (a root-owned 0700
// directory is out of its reach even when listed). Its environment is
// cmd.Env, passed to bwrap as bwrap's own (values stay out of the process
// list). That uid is a gate's own, not the sandboxed commands' ([NobodyUID]
// by default) nor nobody's: namespaces keep an isolated program and a
// sandboxed command apart, but on the host both are processes of their
// uid, and any host process of the same uid (a daemon running as nobody)
// may read a gate's environment, its secrets, through /proc/PID/environ,
// or ptrace it. When that uid has no entry in the host's /etc/passwd
// (or /etc/group), one is added to the sandbox's copy (ssh, for one,
// refuses to run as a uid without a name).
//
// # Limits and life
//
// Limits (pids, memory, cpus) are a cgroup, as for [Backend]: bwrap blocks
// before running the program (--block-fd) until its child, the init of the
// program's pid namespace, has been moved into the cgroup, so a fork bomb
// cannot race the move; when the host offers no cgroup the program runs
// without them, as doctor reports. When the process the caller started
// (bwrap) is gone, so is the whole pid namespace (--die-with-parent), and
// cleanup kills whatever is left of it and removes the cgroup.
type Isolator struct {
	// Path is the bwrap executable; "" looks up "bwrap" in the host PATH.
	Path string
	// Etc lists the /etc entries bound read-only (missing ones are
	// skipped); nil means [DefaultEtc].
	Etc []string
	// ReadOnly lists extra host paths every isolated program reads (a
	// toolchain under /opt, say); each must exist.
	ReadOnly []string
	// UID and GID are who the program runs as when gatebridge is root; 0
	// means GateUID. Ignored when gatebridge is not root.
	UID, GID int
	// Limits bound the program's processes, memory, CPU and /tmp.
	Limits sandbox.Limits
}

// Confinement is what an isolated program may reach beyond what every one
// gets.
type Confinement struct {
	Read    []string // host paths it may read
	Write   []string // host paths it may read and write
	Network bool     // the host's network namespace; without it, only a loopback of its own
}

// isoBind is one host path bound at the same place inside.
type isoBind struct {
	path string
	rw   bool
}

// isoPlan is what one isolated run mounts, with paths resolved.
type isoPlan struct {
	prog  string // the program file, resolved
	dir   string // working directory inside
	binds []isoBind
	data  []isoData
}

// isoData is a file bwrap copies from a descriptor to dest, read-only.
type isoData struct {
	f    *os.File
	fd   int // in bwrap
	dest string
}

// GateUID is the uid (and gid) an isolated program runs as when
// gatebridge is root and no other is configured: a uid of its own, in the
// range systemd leaves unused (1879048192–2147483647), away from nobody
// (65534, the sandboxed commands' default and many daemons'), from
// useradd's subordinate ranges and from container ranges. See [Isolator].
const GateUID = 2000000000

// GateUser is the name the gates' uid and gid get in the sandbox's
// /etc/passwd and /etc/group when the host's have none for them.
const GateUser = "gatebridge-gate"

// maxEtcBytes caps what namedCopy reads of /etc/passwd or /etc/group.
const maxEtcBytes = 4 << 20

// namedCopy returns a descriptor holding the host's file path (an
// /etc/passwd or /etc/group) with line added when no entry of it has id
// in its third field; nil when one has, or the host has no such file.
func namedCopy(path string, id uint32, line string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEtcBytes+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	if len(b) > maxEtcBytes {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxEtcBytes)
	}
	want := strconv.FormatUint(uint64(id), 10)
	for _, l := range strings.Split(string(b), "\n") {
		if fields := strings.Split(l, ":"); len(fields) > 2 && fields[2] == want {
			return nil, nil
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return dataFile(append(b, line...))
}

// plan resolves what cmd and c name. Every path must be absolute and
// exist; c's paths and cmd.Dir must be their own resolved form (no link
// on the way): a caller resolves them once, when it checks them, and a
// link that appears later (the sandbox, which writes the workspace,
// swapping a directory a gate writes for a link to $HOME) is refused
// instead of followed.
func (i *Isolator) plan(cmd *exec.Cmd, c Confinement) (isoPlan, error) {
	real := func(what, p string) (string, error) {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("%s %q is not an absolute path", what, p)
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		return r, nil
	}
	exact := func(what, p string) (string, error) {
		r, err := real(what, p)
		if err == nil && r != filepath.Clean(p) {
			return "", fmt.Errorf("%s %s leads through a link to %s: refusing to follow it (give the resolved path; one that became a link since it was checked was swapped)", what, p, r)
		}
		return r, err
	}
	var pl isoPlan
	var err error
	if pl.prog, err = real("program", cmd.Path); err != nil {
		return pl, err
	}
	var write []string
	for _, p := range c.Write {
		r, err := exact("write path", p)
		if err != nil {
			return pl, err
		}
		write = append(write, r)
		pl.binds = append(pl.binds, isoBind{r, true})
	}
	inWrite := func(p string) bool {
		for _, w := range write {
			if fspath.Within(p, w) {
				return true
			}
		}
		return false
	}
	for k, list := range [][]string{i.ReadOnly, c.Read} {
		for _, p := range list {
			resolve := exact
			if k == 0 {
				resolve = real // the operator's, out of the sandbox's reach
			}
			r, err := resolve("read path", p)
			if err != nil {
				return pl, err
			}
			pl.binds = append(pl.binds, isoBind{r, false})
		}
	}
	pl.dir = "/tmp"
	if cmd.Dir != "" {
		if pl.dir, err = exact("working directory", cmd.Dir); err != nil {
			return pl, err
		}
		if !inWrite(pl.dir) {
			pl.binds = append(pl.binds, isoBind{pl.dir, false})
		}
	}
	// One bind per path (bwrap consumes a descriptor it mounts), the
	// writable one among equals; parents before children (a Read path
	// below a Write path stays read-only). The program file goes last:
	// read-only even inside a Write path.
	rw := map[string]bool{}
	var binds []isoBind
	for _, b := range pl.binds {
		if _, dup := rw[b.path]; !dup {
			binds = append(binds, b)
		}
		rw[b.path] = rw[b.path] || b.rw
	}
	for i := range binds {
		binds[i].rw = rw[binds[i].path]
	}
	sort.SliceStable(binds, func(a, b int) bool { return len(binds[a].path) < len(binds[b].path) })
	pl.binds = binds
	if _, dup := rw[pl.prog]; !dup {
		pl.binds = append(pl.binds, isoBind{pl.prog, false})
	} else {
		for i := range pl.binds {
			if pl.binds[i].path == pl.prog {
				pl.binds[i].rw = false // never writable, even listed in Write
			}
		}
	}
	return pl, nil
}

// identity is who bwrap runs as: nil (ourselves) unless we are root.
func (i *Isolator) identity() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid := cmp.Or(i.UID, GateUID), cmp.Or(i.GID, GateUID)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// Isolate rewrites cmd, not yet started, to run its program (Path, Args,
// Env, Dir) in a sandbox of its own that reaches what c lists (see
// [Isolator]). It locks the calling goroutine to its OS thread for good
// and joins that thread to a new session keyring: start cmd from this
// goroutine and let the goroutine end once cmd has been waited for (the
// program dies with the thread). An error means cmd must not run. cleanup,
// called once after cmd has been waited for (or if it never started),
// stops what is left of the program and releases the cgroup.
func (i *Isolator) Isolate(ctx context.Context, cmd *exec.Cmd, c Confinement) (cleanup func(), err error) {
	runtime.LockOSThread() // never unlocked: see the doc
	fail := func(op string, err error) (func(), error) {
		return nil, &sandbox.Error{Backend: Name, Op: "isolate: " + op, Err: err}
	}
	if runtime.GOOS != "linux" {
		return nil, &sandbox.Error{Backend: Name, Op: "isolate", Err: fmt.Errorf("%w: gates' own sandboxes need Linux", sandbox.ErrUnavailable)}
	}
	if cmd.Process != nil {
		return fail("start", errors.New("the command has already started"))
	}
	if cmd.Err != nil {
		return fail("find the program", cmd.Err)
	}
	bin, err := (&Backend{Path: i.Path}).binary()
	if err != nil {
		return nil, err
	}
	pl, err := i.plan(cmd, c)
	if err != nil {
		return fail("resolve paths", err)
	}
	cred := i.identity()
	if cred != nil {
		// bwrap, started as that uid, would fail with a bare "Permission
		// denied" on the first path it cannot reach: say which and why.
		for _, b := range pl.binds {
			if why := unreachable(b.path, cred.Uid, cred.Gid, b.rw, b.path == pl.prog); why != "" {
				return nil, &sandbox.Error{Backend: Name, Op: "isolate", Err: fmt.Errorf("%s is out of the program's reach: %s", b.path, why),
					Help: "place what a gate reads where its uid (sandbox.gate_uid) can read it, or set sandbox.gate_uid"}
			}
		}
	}
	feat := probeBwrap(ctx, bin)
	if err := ctx.Err(); err != nil {
		return fail("start", err)
	}
	etc := i.Etc
	if etc == nil {
		etc = DefaultEtc
	}
	var named []isoData // /etc/passwd and /etc/group naming the uid, where the host's do not
	if cred != nil && feat.bindData {
		for _, n := range []struct {
			path string
			id   uint32
			line string
		}{
			{"/etc/passwd", cred.Uid, fmt.Sprintf("%s:x:%d:%d:gatebridge gate:/tmp:/usr/sbin/nologin\n", GateUser, cred.Uid, cred.Gid)},
			{"/etc/group", cred.Gid, fmt.Sprintf("%s:x:%d:\n", GateUser, cred.Gid)},
		} {
			if !slices.Contains(etc, n.path) {
				continue
			}
			f, err := namedCopy(n.path, n.id, n.line)
			if err != nil {
				for _, d := range named {
					d.f.Close()
				}
				return fail("name the gate's uid in "+n.path, err)
			}
			if f != nil {
				named = append(named, isoData{f: f, dest: n.path})
			}
		}
	}

	var files []*os.File // ours to close: the child has its copies
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pins := map[string]int{} // bind source → the descriptor bwrap mounts it from
	base := 3 + len(cmd.ExtraFiles)
	extra := []*os.File{}
	for k := range named {
		files = append(files, named[k].f)
		named[k].fd = base + len(extra)
		extra = append(extra, named[k].f)
	}
	if feat.bindFd {
		for _, b := range pl.binds {
			if _, ok := pins[b.path]; ok {
				continue
			}
			f, err := pinPath(b.path)
			if err != nil {
				closeFiles()
				return fail("open "+b.path, err)
			}
			files = append(files, f)
			pins[b.path] = base + len(extra)
			extra = append(extra, f)
		}
	}
	cg, cgErr := newLimitCgroup(i.Limits)
	if noCg := (*noCgroupError)(nil); cgErr != nil && !errors.As(cgErr, &noCg) {
		closeFiles()
		return nil, &sandbox.Error{Backend: Name, Op: "isolate: set up limits", Err: cgErr,
			Help: "check sandbox.limits (cpus at least 0.01, memory at least a few MiB) and that /sys/fs/cgroup is writable"}
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		closeFiles()
		if cg != nil {
			cg.remove()
		}
		return fail("create status pipe", err)
	}
	files = append(files, statusW)
	statusFd := base + len(extra)
	extra = append(extra, statusW)
	var blockR, blockW *os.File
	blockFd := -1
	if cg != nil {
		if blockR, blockW, err = os.Pipe(); err != nil {
			closeFiles()
			statusR.Close()
			cg.remove()
			return fail("create block pipe", err)
		}
		files = append(files, blockR)
		blockFd = base + len(extra)
		extra = append(extra, blockR)
	}
	// The thread that starts bwrap hands it its session keyring: a fresh
	// one, so the program cannot read or use the invoker's keys.
	if err := newSessionKeyring(); err != nil {
		closeFiles()
		statusR.Close()
		if blockW != nil {
			blockW.Close()
		}
		if cg != nil {
			cg.remove()
		}
		return fail("keyring", err)
	}

	pl.data = named
	cmd.Args = i.args(pl, cmd.Args, c.Network, feat, pins, statusFd, blockFd)
	cmd.Path = bin
	cmd.Dir = "/" // bwrap's own; the program's is --chdir
	cmd.ExtraFiles = append(cmd.ExtraFiles, extra...)
	cmd.SysProcAttr = isolateAttr(cmd.SysProcAttr, cred)

	st := newBwrapStatus()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		st.read(statusR)
	}()
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		if cg == nil {
			return
		}
		defer blockW.Close() // at EOF bwrap goes on: kill first on failure
		<-st.known
		pid, _ := st.ns()
		if pid <= 0 {
			return // bwrap never got that far, or never started
		}
		if err := cg.adopt(pid); err != nil {
			syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		blockW.Write([]byte{0})
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			closeFiles()
			// bwrap is gone; its child, the namespace's init, dies with
			// it (--die-with-parent) and then holds the status pipe no
			// more: read what it reported, kill what is left.
			select {
			case <-readDone:
			case <-time.After(time.Second):
			}
			stopNamespace(st)
			statusR.Close()
			<-readDone
			<-moved
			if cg != nil {
				cg.remove()
			}
		})
	}, nil
}

// args builds bwrap's argv for plan pl: the program, the arguments after
// argv[0] of argv, and the status and block descriptors (-1: none).
func (i *Isolator) args(pl isoPlan, argv []string, network bool, feat bwrapFeatures, pins map[string]int, statusFd, blockFd int) []string {
	a := []string{"bwrap", "--unshare-all"}
	if network {
		a = append(a, "--share-net")
	}
	a = append(a, "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "gatebridge")
	if feat.disableUserns {
		a = append(a, "--unshare-user", "--disable-userns")
	}
	a = append(a, systemArgs()...)
	etc := i.Etc
	if etc == nil {
		etc = DefaultEtc
	}
	if network {
		etc = append(append([]string{}, etc...), "/etc/resolv.conf", "/etc/gai.conf")
	}
	for _, e := range etc {
		a = append(a, etcArgs(e)...)
	}
	for _, d := range pl.data {
		a = append(a, "--ro-bind-data", strconv.Itoa(d.fd), d.dest) // the program's own file inside: it reads it
	}
	a = append(a, "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev")
	for _, d := range []string{"/tmp", "/dev/shm"} {
		if i.Limits.TmpSize > 0 {
			a = append(a, "--size", strconv.FormatInt(i.Limits.TmpSize, 10))
		}
		a = append(a, "--perms", "01777", "--tmpfs", d)
	}
	for _, b := range pl.binds {
		fd, pinned := pins[b.path]
		switch {
		case pinned && b.rw:
			a = append(a, "--bind-fd", strconv.Itoa(fd), b.path)
		case pinned:
			a = append(a, "--ro-bind-fd", strconv.Itoa(fd), b.path)
		case b.rw:
			a = append(a, "--bind", b.path, b.path)
		default:
			a = append(a, "--ro-bind", b.path, b.path)
		}
	}
	a = append(a, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", pl.dir, "--json-status-fd", strconv.Itoa(statusFd))
	if blockFd >= 0 {
		a = append(a, "--block-fd", strconv.Itoa(blockFd))
	}
	a = append(a, "--", pl.prog)
	if len(argv) > 1 {
		a = append(a, argv[1:]...)
	}
	return a
}

// isolatorChecks caches Check per configuration for the life of the
// process.
var isolatorChecks struct {
	mu   sync.Mutex
	done map[string]error
}

// Check runs `true` isolated, as Isolate would run a gate's program, and
// explains a failure with a hint (bwrap missing, user namespaces
// disabled, an unprivileged container, not Linux). The result is cached
// per configuration for the life of the process.
func (i *Isolator) Check(ctx context.Context) error {
	if runtime.GOOS != "linux" {
		return &sandbox.Error{Backend: Name, Op: "isolate", Err: fmt.Errorf("%w: gates' own sandboxes need Linux and bubblewrap", sandbox.ErrUnavailable)}
	}
	bin, err := (&Backend{Path: i.Path}).binary()
	if err != nil {
		return err
	}
	key := fmt.Sprint(bin, i.Etc, i.ReadOnly, i.identity(), i.Limits)
	isolatorChecks.mu.Lock()
	defer isolatorChecks.mu.Unlock()
	if err, ok := isolatorChecks.done[key]; ok {
		return err
	}
	err = i.check(ctx)
	if ctx.Err() == nil {
		if isolatorChecks.done == nil {
			isolatorChecks.done = map[string]error{}
		}
		isolatorChecks.done[key] = err
	}
	return err
}

func (i *Isolator) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	prog, err := exec.LookPath("true")
	if err != nil {
		return &sandbox.Error{Backend: Name, Op: "isolate: check", Err: err}
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, prog)
	cmd.Stderr = &stderr
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked (see Isolate)
		cleanup, err := i.Isolate(ctx, cmd, Confinement{})
		if err != nil {
			errc <- err
			return
		}
		err = cmd.Run()
		cleanup()
		errc <- err
	}()
	err = <-errc
	var se *sandbox.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return err
	case ctx.Err() != nil:
		return &sandbox.Error{Backend: Name, Op: "isolate: check", Err: fmt.Errorf("%w: `bwrap … true` did not finish: %v", sandbox.ErrUnavailable, ctx.Err()),
			Help: "bwrap hangs on this machine: run `bwrap --unshare-all --ro-bind / / true` to investigate"}
	}
	msg := bwrapMessage(stderr.Bytes())
	return &sandbox.Error{Backend: Name, Op: "isolate: check", Err: fmt.Errorf("%w: `bwrap … true` failed (%v): %s", sandbox.ErrUnavailable, err, msg),
		Help: diagnose(msg, hostProbe{uid: os.Getuid()})}
}
