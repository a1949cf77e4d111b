package hostilefs

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tmpfsDir is a fresh directory where sessions live by default (a tmpfs
// when there is one), so removal is timed as it runs for real.
func tmpfsDir(t testing.TB) string {
	t.Helper()
	parent := os.TempDir()
	if WritableTmpfs("/dev/shm") {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, "gbtest-rm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveTree(dir) })
	return dir
}

// mkChain makes depth nested directories named name under dir, one fd at
// a time (the path is far longer than PATH_MAX), as a sandbox can with
// `while mkdir d && cd d; do :; done`. It returns the deepest directory's
// fd, open, for the caller to plant more in (close it).
func mkChain(t testing.TB, dir, name string, depth int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range depth {
		if err := unix.Mkdirat(fd, name, 0o700); err != nil {
			t.Fatalf("mkdir at level %d: %v", i, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open at level %d: %v", i, err)
		}
		fd = next
	}
	return fd
}

// withNofile runs fn with the soft RLIMIT_NOFILE lowered to n, restoring
// it after (no test in this package runs in parallel with another).
func withNofile(t *testing.T, n uint64, fn func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = min(n, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatalf("restore RLIMIT_NOFILE: %v", err)
		}
	}()
	fn()
}

// A sandbox nests directories in calls/ deeper than the host may open
// files (issue 26, item 4: 6000 levels under `ulimit -n 4096` failed with
// "too many open files" and stayed on /dev/shm). RemoveTree removes the
// whole session with the fd limit at 64, at any depth, in time linear in
// the depth.
func TestRemoveTreeDeeperThanFdLimit(t *testing.T) {
	for _, depth := range []int{6000, 20000} {
		root := filepath.Join(tmpfsDir(t), "session")
		for _, d := range []string{"calls", "responses", "tmp"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		fd := mkChain(t, filepath.Join(root, "calls"), "d", depth)
		// At the bottom: a file, a link out, and a directory made
		// unreadable (its content too).
		unix.Mkdirat(fd, "locked", 0o700)
		unix.Symlinkat("/", fd, "up")
		if f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600); err == nil {
			unix.Close(f)
		}
		l, err := unix.Openat(fd, "locked", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Mkdirat(l, "inner", 0o700)
		unix.Close(l)
		unix.Fchmodat(fd, "locked", 0, 0)
		unix.Close(fd)

		var rerr error
		start := time.Now()
		withNofile(t, 64, func() { rerr = RemoveTree(root) })
		took := time.Since(start)
		t.Logf("%d levels removed in %v", depth, took)
		if rerr != nil {
			t.Fatalf("RemoveTree of %d levels: %v", depth, rerr)
		}
		if _, err := os.Lstat(root); !os.IsNotExist(err) {
			t.Fatalf("the tree is still there: %v", err)
		}
		// Linear: ~0.1 s for 20,000 levels here; a walk that re-opens
		// the path from the top at every level takes minutes.
		if took > 20*time.Second {
			t.Errorf("%d levels took %v to remove", depth, took)
		}
	}
}

// The same for a call's directory removed with a budget (Box.Remove): the
// budget stops it, not the fd limit, and what it leaves stays under the
// call's own (moved) name.
func TestRemoveAllAtBudgetDeepChain(t *testing.T) {
	dir := tmpfsDir(t)
	fd := mkChain(t, dir, "d", 5000)
	unix.Close(fd)
	parent, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(parent)
	budget := 64
	withNofile(t, 32, func() { err = RemoveAllAt(parent, "d", &budget) })
	if err == nil || !strings.Contains(err.Error(), "too many entries") {
		t.Fatalf("RemoveAllAt with budget 64 of 5000 levels: %v, want the budget error", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "d" {
		t.Fatalf("left %v, want only d", ents)
	}
	budget = 1 << 20
	withNofile(t, 32, func() { err = RemoveAllAt(parent, "d", &budget) })
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}

// The names deep directories are moved up to are taken already (a
// sandbox that can write the top guessed them): a link there is removed,
// not followed, a file or directory there is removed with the rest, and
// the chain still goes.
func TestRemoveTreeStagingNamesTaken(t *testing.T) {
	host := t.TempDir()
	keep := filepath.Join(host, "keep")
	if err := os.WriteFile(keep, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(tmpfsDir(t), "top")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	unix.Close(mkChain(t, root, "d", 300))
	prefix := ".gb-rm-" + itoa(os.Getpid()) + "-" + strconv.FormatUint(removals.Load()+1, 10) + "-"
	for i := range 5 {
		p := filepath.Join(root, prefix+itoa(i))
		switch i % 3 {
		case 0:
			os.Symlink(host, p)
		case 1:
			os.WriteFile(p, nil, 0o600)
		case 2:
			os.MkdirAll(filepath.Join(p, "x"), 0o700)
		}
	}
	var err error
	withNofile(t, 32, func() { err = RemoveTree(root) })
	if err != nil {
		t.Fatalf("RemoveTree: %v", err)
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Fatalf("the tree is still there: %v", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
		t.Fatalf("the file behind the planted link: %q, %v", b, err)
	}
}

// One directory with many non-empty subdirectories (each a short chain)
// and many files: each listed once, so linear too.
func TestRemoveTreeWide(t *testing.T) {
	root := filepath.Join(tmpfsDir(t), "top")
	if err := os.MkdirAll(filepath.Join(root, "calls"), 0o700); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(root, "calls")
	for i := range 3000 {
		os.MkdirAll(filepath.Join(calls, "w", itoa(i), "a", "b"), 0o700)
		os.WriteFile(filepath.Join(calls, "f"+itoa(i)), nil, 0o600)
	}
	start := time.Now()
	var err error
	withNofile(t, 32, func() { err = RemoveTree(root) })
	t.Logf("12,000 entries removed in %v", time.Since(start))
	if err != nil {
		t.Fatalf("RemoveTree: %v", err)
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Fatalf("the tree is still there: %v", err)
	}
}

// A process of a persistent sandbox still runs with its cwd in the
// session being removed and keeps nesting directories (`while mkdir d &&
// cd d; do :; done`): the removal gives up in bounded time, with an
// error, rather than chasing it for ever, and finishes once it stops.
func TestRemoveTreeWhileWritten(t *testing.T) {
	root := filepath.Join(tmpfsDir(t), "session")
	if err := os.MkdirAll(filepath.Join(root, "calls"), 0o700); err != nil {
		t.Fatal(err)
	}
	fd := mkChain(t, filepath.Join(root, "calls"), "d", 2000)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		defer func() { unix.Close(fd); done <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if unix.Mkdirat(fd, "d", 0o700) != nil {
				return // its directory was removed under it
			}
			next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return
			}
			unix.Close(fd)
			fd = next
			n++
		}
	}()
	start := time.Now()
	err := RemoveTreeWithin(root, 500*time.Millisecond)
	took := time.Since(start)
	close(stop)
	n := <-done
	t.Logf("after %v: %v (the writer made %d levels)", took, err, n)
	if took > 5*time.Second {
		t.Errorf("the removal ran %v against a 500ms bound", took)
	}
	if err != nil && !errors.Is(err, errTooLong) {
		t.Errorf("error %v, want nil (caught up) or the time bound", err)
	}
	if err := RemoveTree(root); err != nil {
		t.Fatalf("RemoveTree once the writer stopped: %v", err)
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Fatalf("the tree is still there: %v", err)
	}
}

// A filesystem mounted inside the tree is not emptied (it may be the
// host's) and the removal says so, naming it relative to the top; the
// rest goes. The mount lives in a mount namespace of this test's own
// thread (root only).
func TestRemoveTreeLeavesMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a filesystem (in a private mount namespace)")
	}
	root := filepath.Join(tmpfsDir(t), "session")
	if err := os.MkdirAll(filepath.Join(root, "calls", "m"), 0o700); err != nil {
		t.Fatal(err)
	}
	unix.Close(mkChain(t, filepath.Join(root, "calls"), "d", 100))
	type result struct {
		err, rerr error
		inside    []os.DirEntry
	}
	ch := make(chan result)
	go func() {
		// The thread is not unlocked: it ends with this goroutine, and
		// its mount namespace (with the mount) with it.
		runtime.LockOSThread()
		var res result
		defer func() { ch <- res }()
		if res.err = unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); res.err != nil {
			return
		}
		if res.err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); res.err != nil {
			return
		}
		m := filepath.Join(root, "calls", "m")
		if res.err = unix.Mount("gbtest", m, "tmpfs", 0, "size=1m"); res.err != nil {
			return
		}
		os.WriteFile(filepath.Join(m, "host-file"), []byte("keep"), 0o600)
		res.rerr = RemoveTree(root)
		res.inside, _ = os.ReadDir(m)
	}()
	res := <-ch
	if res.err != nil {
		t.Skipf("cannot mount in a private namespace here: %v", res.err)
	}
	if res.rerr == nil || !strings.Contains(res.rerr.Error(), "calls/m: ") || !errors.Is(res.rerr, errMountPoint) {
		t.Errorf("RemoveTree: %v, want calls/m named as a mount point", res.rerr)
	}
	if len(res.inside) != 1 {
		t.Errorf("the mounted filesystem was emptied: %v", res.inside)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "calls"))
	if len(ents) != 1 || ents[0].Name() != "m" {
		t.Errorf("left in calls/: %v, want only m", ents)
	}
}
