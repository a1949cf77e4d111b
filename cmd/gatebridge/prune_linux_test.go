package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
	"github.com/gatebridge/gatebridge/sandbox/docker"
)

// fakeEngine answers the few docker API calls prune and sandbox start
// make, on a unix socket of the test's own, so these tests need no engine
// and touch no one else's containers: ping, the container list (persistent
// sandboxes and their sessions roots), image inspect (present or not),
// pull (always refused) and container create (refused: conflict or
// error).
type fakeEngine struct {
	mu           sync.Mutex
	sandboxes    map[string]string // name → sessions root
	imagePresent bool
	conflict     bool // create answers 409 (the name is taken)
	creates      int
}

// startFakeEngine serves f and points DOCKER_HOST at it.
func startFakeEngine(t *testing.T, f *fakeEngine) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	t.Setenv("DOCKER_HOST", "unix://"+sock)
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.Path
	if strings.HasPrefix(path, "/v1.") {
		path = path[strings.Index(path[1:], "/")+1:]
	}
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	fail := func(code int, msg string) {
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"message": msg})
	}
	switch {
	case path == "/_ping":
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("OK"))
	case path == "/containers/json":
		list := []map[string]any{}
		for name, root := range f.sandboxes {
			list = append(list, map[string]any{
				"Id": fmt.Sprintf("%064x", len(list)+1), "Names": []string{"/" + docker.ContainerPrefix + name},
				"Image": "img", "State": "running", "Status": "Up", "Created": time.Now().Unix(),
				"Labels": map[string]string{docker.LabelOwner: docker.OwnerValue, docker.LabelPersistent: name,
					docker.LabelSessionsRoot: root},
			})
		}
		json.NewEncoder(w).Encode(list)
	case path == "/info":
		w.Write([]byte(`{"OperatingSystem":"fake"}`))
	case path == "/version": // which engine it is (docker's facts)
		w.Write([]byte(`{"Version":"fake"}`))
	case strings.HasPrefix(path, "/images/") && strings.HasSuffix(path, "/json"):
		if !f.imagePresent {
			fail(404, "No such image")
			return
		}
		w.Write([]byte(`{"Id":"sha256:0000000000000000000000000000000000000000000000000000000000000000","Config":{}}`))
	case path == "/images/create":
		fail(404, "pull access denied: no registry here")
	case path == "/containers/create":
		f.creates++
		if f.conflict {
			fail(409, "Conflict. The container name is already in use")
			return
		}
		fail(500, "fake engine: create refused")
	default:
		fail(404, "fake engine: not served: "+r.Method+" "+path)
	}
}

// isolateSessions points the default session parent at a fresh tmpfs
// directory of this test (XDG_RUNTIME_DIR), and the config away from the
// user's, so that prune and start touch nothing of anyone else's. It
// returns the default session parent, created.
func isolateSessions(t *testing.T) string {
	t.Helper()
	dir := bridge.DefaultDir()
	base, err := os.MkdirTemp(dir, "gbtest-xdg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hostilefs.RemoveTree(base) })
	t.Setenv("XDG_RUNTIME_DIR", base)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEBRIDGE_CONFIG", "")
	parent := bridge.DefaultParent()
	if !strings.HasPrefix(parent, base+"/") {
		t.Skipf("no tmpfs for the sessions here (%s is not one): they would go to %s", dir, parent)
	}
	if err := bridge.EnsurePrivateParent(parent); err != nil {
		t.Fatal(err)
	}
	return parent
}

var sessions int

// deadSession makes a session under parent whose gatebridge died (its
// lock file is there and free) and returns its root.
func deadSession(t *testing.T, parent string) string {
	t.Helper()
	sessions++
	root := filepath.Join(parent, fmt.Sprintf("%s%016x%016x", mailbox.SessionPrefix, time.Now().UnixNano(), sessions))
	for _, d := range []string{"bin", "calls/x", "responses", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(root+mailbox.LockSuffix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

// nest makes depth nested directories "d" in dir, fd-relative (the path
// outgrows PATH_MAX), as a sandbox can in its calls/.
func nest(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range depth {
		if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
			t.Fatalf("level %d: %v", i, err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("level %d: %v", i, err)
		}
		fd = next
	}
	unix.Close(fd)
}

// A dead session whose calls/ holds a chain of directories deeper than
// the process may open files (issue 26, item 4: 6000 levels under `ulimit
// -n 4096` failed with "too many open files", and prune still exited 0):
// prune removes it and says so.
func TestPruneDeepSession(t *testing.T) {
	parent := isolateSessions(t)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	root := deadSession(t, parent)
	nest(t, filepath.Join(root, "calls", "x"), 6000)

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = min(4096, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	start := time.Now()
	code := run([]string{"prune"}, nil, &out, &errb)
	took := time.Since(start)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("restore RLIMIT_NOFILE: %v", err)
	}
	t.Logf("prune of 6000 levels under nofile 4096: exit %d in %v; stderr:\n%s", code, took, errb.String())
	if code != 0 || !strings.Contains(out.String(), root+"\n") {
		t.Errorf("prune: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if _, err := os.Lstat(root); err == nil {
		t.Errorf("%s is still there", root)
	}
}

// A dead session prune cannot remove (here: a filesystem is mounted in
// its calls/, which prune must not empty) is named with the reason, and
// prune exits non-zero; the other dead session goes. The mount lives in a
// mount namespace of the test's own thread (root only), which prune runs
// on.
func TestPruneReportsWhatStays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a filesystem (in a private mount namespace)")
	}
	parent := isolateSessions(t)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	stuck := deadSession(t, parent)
	gone := deadSession(t, parent)
	m := filepath.Join(stuck, "calls", "x", "m")
	if err := os.Mkdir(m, 0o700); err != nil {
		t.Fatal(err)
	}
	type result struct {
		err       error
		code      int
		out, errb string
	}
	ch := make(chan result)
	go func() {
		// The thread is not unlocked: it ends with this goroutine, and
		// its mount namespace with it.
		runtime.LockOSThread()
		var res result
		defer func() { ch <- res }()
		if res.err = unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); res.err != nil {
			return
		}
		if res.err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); res.err != nil {
			return
		}
		if res.err = unix.Mount("gbtest", m, "tmpfs", 0, "size=1m"); res.err != nil {
			return
		}
		var out, errb bytes.Buffer
		res.code = run([]string{"prune"}, nil, &out, &errb)
		res.out, res.errb = out.String(), errb.String()
	}()
	res := <-ch
	if res.err != nil {
		t.Skipf("cannot mount in a private namespace here: %v", res.err)
	}
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.out, res.errb)
	if res.code == 0 {
		t.Errorf("prune exited 0 with %s left behind", stuck)
	}
	// The line names the session and, under it, where the mount point is
	// now (a directory the removal moved up is under .gb-rm-*).
	rel, ok := "", false
	for _, l := range strings.Split(res.errb, "\n") {
		if rest, found := strings.CutPrefix(l, "gatebridge: could not remove "+stuck+": "); found {
			rel, ok = strings.CutSuffix(rest, ": is on another filesystem (a mount point: not removed)")
		}
	}
	if !ok || filepath.Base(rel) != "m" {
		t.Errorf("stderr does not name %s and the mount point in it", stuck)
	} else if st, err := os.Lstat(filepath.Join(stuck, rel)); err != nil || !st.IsDir() {
		t.Errorf("the path named, %s, is not there: %v", filepath.Join(stuck, rel), err)
	}
	if !strings.Contains(res.out, gone+"\n") {
		t.Errorf("the other dead session %s is not listed as removed", gone)
	}
	if _, err := os.Lstat(gone); err == nil {
		t.Errorf("%s is still there", gone)
	}
}

// A default sessions root (sandbox-NAME) that no sandbox uses, left by a
// start that was killed or a container removed with docker rm (issue 31,
// friction 6: prune said "removed 0" with it there), goes with prune,
// listed and counted; the root of a sandbox the engine lists, a fresh one
// (a start may be under way) and one still holding a live session stay.
// Without an engine that answers, none is touched.
func TestPruneUnusedSandboxRoots(t *testing.T) {
	parent := isolateSessions(t)
	mk := func(name string, age time.Duration) string {
		root := filepath.Join(parent, "sandbox-"+name)
		if err := os.MkdirAll(filepath.Join(root, ".agent", "req"), 0o711); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-age)
		if err := os.Chtimes(root, then, then); err != nil {
			t.Fatal(err)
		}
		return root
	}
	ghost := mk("ghost", 2*time.Minute)
	// Its sessions were pruned first (a dead one in it goes too).
	ghostSession := deadSession(t, ghost)
	nest(t, filepath.Join(ghostSession, "calls", "x"), 100)
	old := time.Now().Add(-2 * time.Minute)
	os.Chtimes(ghost, old, old)
	live := mk("live", 2*time.Minute)
	young := mk("young", 0)
	busy := mk("busy", 2*time.Minute)
	lease, err := os.OpenFile(filepath.Join(busy, mailbox.SessionPrefix+strings.Repeat("a", 32)+mailbox.LockSuffix), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	if err := unix.Flock(int(lease.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(busy, mailbox.SessionPrefix+strings.Repeat("a", 32)), 0o700)
	os.Chtimes(busy, old, old)

	// No engine: nothing is known about the roots, none goes.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent")
	var out, errb bytes.Buffer
	code := run([]string{"prune"}, nil, &out, &errb)
	if code != 0 || !strings.Contains(errb.String(), "sandbox sessions root(s) not checked") {
		t.Errorf("prune without an engine: exit %d, stderr %q", code, errb.String())
	}
	for _, r := range []string{ghost, live, young, busy} {
		if _, err := os.Lstat(r); err != nil {
			t.Fatalf("prune without an engine removed %s", r)
		}
	}
	os.Chtimes(ghost, old, old)

	startFakeEngine(t, &fakeEngine{sandboxes: map[string]string{"live": live}})
	out.Reset()
	errb.Reset()
	code = run([]string{"prune"}, nil, &out, &errb)
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	if code != 0 {
		t.Errorf("prune: exit %d", code)
	}
	if !strings.Contains(out.String(), ghost+"\n") || !strings.Contains(errb.String(), "removed 1 unused sandbox sessions root(s)") {
		t.Errorf("prune did not list and count %s", ghost)
	}
	if _, err := os.Lstat(ghost); err == nil {
		t.Errorf("%s is still there", ghost)
	}
	for _, r := range []string{live, young, busy} {
		if _, err := os.Lstat(r); err != nil {
			t.Errorf("prune removed %s", r)
		}
	}
}

// A `sandbox start` that fails leaves no sessions root behind (issue 31,
// friction 6: `--image nosuch` left one in /dev/shm): not when the image is
// missing, not when the engine refuses the container. A root that was
// there before the start (another sandbox's) stays.
func TestSandboxStartFailureLeavesNoRoot(t *testing.T) {
	parent := isolateSessions(t)
	ws := t.TempDir()
	f := &fakeEngine{}
	startFakeEngine(t, f)
	start := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"sandbox", "start", "--workspace", ws}, args...), nil, &out, &errb)
		return code, errb.String()
	}
	left := func() []string {
		m, _ := filepath.Glob(filepath.Join(parent, "sandbox-*"))
		return m
	}

	code, stderr := start("--image", "nosuch", "x1")
	if code == 0 || !strings.Contains(stderr, "nosuch") {
		t.Errorf("start --image nosuch: exit %d, stderr %q", code, stderr)
	}
	if l := left(); len(l) != 0 {
		t.Errorf("a start with a missing image left %v", l)
	}

	f.mu.Lock()
	f.imagePresent = true
	f.mu.Unlock()
	code, stderr = start("x2")
	if code == 0 || !strings.Contains(stderr, "create refused") {
		t.Errorf("start with create refused: exit %d, stderr %q", code, stderr)
	}
	if l := left(); len(l) != 0 {
		t.Errorf("a start the engine refused left %v", l)
	}

	// The name is taken by a sandbox that uses its root: it stays.
	taken := filepath.Join(parent, "sandbox-x3")
	if err := os.Mkdir(taken, 0o711); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.conflict = true
	f.sandboxes = map[string]string{"x3": taken}
	f.mu.Unlock()
	code, stderr = start("x3")
	if code == 0 || !strings.Contains(stderr, "already exists") {
		t.Errorf("start of a taken name: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Lstat(taken); err != nil {
		t.Errorf("a failed start removed the root of the sandbox that has the name: %v", err)
	}
	if f.creates != 2 {
		t.Errorf("%d container creates, want 2 (the image check comes first)", f.creates)
	}
}
