package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/sandbox"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as other uids")
	}
}

// asUser runs sh -c script as uid:gid with no other groups.
func asUser(uid, gid int, script string) string {
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	b, _ := cmd.CombinedOutput()
	return string(b)
}

// traversableTempDir is a t.TempDir other uids can reach (0711 along the
// temp dir's own path), so only the session's own modes protect it.
func traversableTempDir(t *testing.T) string {
	d := t.TempDir()
	os.Chmod(filepath.Dir(d), 0o711)
	os.Chmod(d, 0o711)
	return d
}

// handCall publishes a call the way a client that never acknowledges
// does, and waits for its response: the response stays in the session.
func handCall(t *testing.T, s *Session, id, gate string, args ...string) {
	t.Helper()
	d := filepath.Join(s.Dirs().Calls, id)
	mustOK(t, os.MkdirAll(filepath.Join(d, "args"), 0o755))
	for i, a := range args {
		mustOK(t, os.WriteFile(filepath.Join(d, "args", strconv.Itoa(i)), []byte(a), 0o644))
	}
	mustOK(t, os.WriteFile(filepath.Join(d, "gate"), []byte(gate), 0o644))
	mustOK(t, os.WriteFile(filepath.Join(d, "ready"), nil, 0o644))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(s.Dirs().Responses, id+".exit")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no response to %s", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Session dirs were 0755 and responses 0644: any local user read another's
// read_file output. A third uid, even one in the sandbox's group, can now
// neither list nor read nor write a session, while the uid the session was
// handed to (Allow) can use it.
func TestSessionPrivateToThirdUID(t *testing.T) {
	needRoot(t)
	s, err := Open(Config{Gates: testRegistry(t), Dir: traversableTempDir(t)})
	mustOK(t, err)
	defer s.Close()
	mustOK(t, s.Allow(65534, 65534))
	const secret = "SECRET-RESPONSE-4711"
	handCall(t, s, "k", "t_echo", secret)
	d := s.Dirs()
	probe := fmt.Sprintf(`ls %[1]s; ls %[2]s; cat %[2]s/k.stdout; echo x > %[3]s/x && echo wrote; echo end`, d.Root, d.Responses, d.Calls)

	sb := asUser(65534, 65534, probe)
	if !strings.Contains(sb, secret) || !strings.Contains(sb, "wrote") {
		t.Errorf("the allowed uid 65534 cannot use its session: %s", sb)
	}
	os.Remove(filepath.Join(d.Calls, "x"))

	// Where the filesystem has ACLs, Allow shares nothing with the group.
	_, aclErr := unix.Getxattr(d.Responses, "system.posix_acl_access", make([]byte, 256))
	gid := 12345
	if aclErr == nil {
		gid = 65534
	} else {
		t.Logf("no ACL on the session (%v): the chown fallback was used; the third uid is not in the sandbox's group", aclErr)
	}
	third := asUser(12345, gid, probe)
	if strings.Contains(third, secret) || strings.Contains(third, "k.stdout\n") || strings.Contains(third, "wrote") || !strings.Contains(third, "end") {
		t.Errorf("uid 12345 (gid %d) reached the session: %s", gid, third)
	}
	if _, err := os.Stat(filepath.Join(d.Calls, "x")); err == nil {
		t.Error("uid 12345 wrote into calls/")
	}
}

// A parent planted by another user (a symlink, a directory of theirs, a
// group/other-writable one) would let them see or swap sessions: Open
// refuses it with a clear error.
func TestPlantedParentRefused(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "gbtest-")
	if err != nil {
		t.Skip("no /dev/shm to be the default dir")
	}
	defer os.RemoveAll(shm)
	t.Setenv("XDG_RUNTIME_DIR", shm)
	parent := DefaultParent()
	if filepath.Dir(parent) != shm {
		t.Skipf("%s is not a writable tmpfs: DefaultParent is %s", shm, parent)
	}
	open := func() error {
		s, err := Open(Config{Gates: testRegistry(t)})
		if err == nil {
			s.Close()
		}
		return err
	}
	// Absent: created 0711, sessions go there.
	mustOK(t, open())
	if fi, err := os.Lstat(parent); err != nil || fi.Mode().Perm() != 0o711 || !fi.IsDir() {
		t.Fatalf("parent %v %v", fi, err)
	}
	mustOK(t, os.Remove(parent))

	elsewhere := filepath.Join(shm, "elsewhere")
	mustOK(t, os.Mkdir(elsewhere, 0o777))
	mustOK(t, os.Symlink(elsewhere, parent))
	if err := open(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("symlinked parent: %v", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("a session went through the planted symlink: %v", ents)
	}
	mustOK(t, os.Remove(parent))

	mustOK(t, os.Mkdir(parent, 0o777))
	mustOK(t, os.Chmod(parent, 0o777))
	if err := open(); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable parent: %v", err)
	}
	if os.Geteuid() == 0 {
		mustOK(t, os.Chmod(parent, 0o711))
		mustOK(t, os.Chown(parent, 12345, 12345))
		if err := open(); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("parent owned by another user: %v", err)
		}
	}
}

// Result.Calls is the run's own: a second Run on a session does not
// repeat the first one's calls, and records past max_records are counted.
func TestCallsArePerRunAndCapped(t *testing.T) {
	s, err := Open(Config{Gates: testRegistry(t), Dir: t.TempDir(), Limits: Limits{MaxRecords: 3, MaxRecordBytes: 100}})
	mustOK(t, err)
	defer s.Close()
	long := strings.Repeat("a", 300)
	r1, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c",
		"for i in 1 2 3 4 5; do t_echo " + long + " >/dev/null; done"}})
	mustOK(t, err)
	r2, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", "t_echo two >/dev/null"}})
	mustOK(t, err)
	if len(r1.Calls) != 3 || r1.CallsOmitted != 2 {
		t.Errorf("run 1: %d records, %d omitted; want 3 and 2", len(r1.Calls), r1.CallsOmitted)
	}
	for _, c := range r1.Calls {
		if n := len(strings.Join(c.Args, "")); n > 100+100 || !strings.Contains(strings.Join(c.Args, " "), "max_record_bytes") {
			t.Errorf("record keeps %d argument bytes, no truncation mark: %q", n, c.Args)
		}
	}
	if len(r2.Calls) != 1 || r2.CallsOmitted != 0 || r2.Calls[0].Args[0] != "two" {
		t.Errorf("run 2 records %+v (omitted %d): want only its own call", r2.Calls, r2.CallsOmitted)
	}
}

// A gatebridge killed with SIGKILL leaves its session; the session's
// flock dies with it, so Prune removes the session (a live one stays),
// including directories the sandbox (uid 65534 when root) made unreadable.
func TestPruneDeadOwner(t *testing.T) {
	if dir := os.Getenv("GB_TEST_PRUNE_CHILD"); dir != "" {
		s, err := Open(Config{Gates: testRegistry(t), Dir: dir})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		// The sandbox made parts of it unreadable: as uid 65534 when we
		// are root (root could remove them anyway), else as ourselves.
		mk := fmt.Sprintf(`cd %s && mkdir -p x/y && touch x/y/f && chmod 000 x/y x`, s.Dirs().Calls)
		if os.Geteuid() == 0 {
			s.Allow(65534, 65534)
			asUser(65534, 65534, mk)
		} else {
			exec.Command("sh", "-c", mk).Run()
		}
		fmt.Println(s.Dirs().Root)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		dir = traversableTempDir(t)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestPruneDeadOwner$")
	child.Env = append(os.Environ(), "GB_TEST_PRUNE_CHILD="+dir)
	out, err := child.StdoutPipe()
	mustOK(t, err)
	mustOK(t, child.Start())
	defer child.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	root := strings.TrimSpace(line)
	if !strings.HasPrefix(root, dir) {
		t.Fatalf("child: %q", line)
	}
	live, err := Open(Config{Gates: testRegistry(t), Dir: dir})
	mustOK(t, err)
	defer live.Close()

	if removed, err := PruneSessions(dir); len(removed) != 0 || err != nil {
		t.Fatalf("Prune removed %v (%v) while the owners live", removed, err)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "calls", "x")); len(m) != 1 {
		t.Fatalf("the child made no unreadable dir in %s", root)
	}
	mustOK(t, child.Process.Signal(syscall.SIGKILL))
	child.Wait()
	removed, err := PruneSessions(dir)
	if err != nil || len(removed) != 1 || removed[0] != root {
		t.Errorf("Prune after the owner died: removed %v, %v; want [%s]", removed, err, root)
	}
	if _, err := os.Lstat(root); err == nil {
		t.Errorf("%s still there", root)
	}
	if _, err := os.Lstat(root + mailbox.LockSuffix); err == nil {
		t.Errorf("%s.lock still there", root)
	}
	if _, err := os.Lstat(live.Dirs().Root); err != nil {
		t.Errorf("Prune removed a live session: %v", err)
	}

	// A gb-* dir with no lock file (a gatebridge older than the lease, or
	// killed between the two) goes once it is a minute old.
	stale := filepath.Join(dir, mailbox.SessionPrefix+strings.Repeat("ab", 16))
	mustOK(t, os.Mkdir(stale, 0o700))
	if removed, _ := PruneSessions(dir); len(removed) != 0 {
		t.Errorf("Prune removed a fresh lockless dir: %v", removed)
	}
	old := time.Now().Add(-2 * time.Minute)
	mustOK(t, os.Chtimes(stale, old, old))
	if removed, _ := PruneSessions(dir); len(removed) != 1 || removed[0] != stale {
		t.Errorf("Prune of a stale lockless dir: %v", removed)
	}
}

// A command made directories in its session unreadable (chmod 000, as its
// own non-root uid); Close still removes the whole session.
func TestCloseRemovesUnreadableDirs(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		dir = traversableTempDir(t)
	}
	s, err := Open(Config{Gates: testRegistry(t), Dir: dir})
	mustOK(t, err)
	script := fmt.Sprintf(`cd %s && mkdir -p x/y/z && touch x/y/f && chmod 000 x/y x && mkdir -p w && chmod 000 w && echo made`, s.Dirs().Calls)
	var out string
	if os.Geteuid() == 0 {
		mustOK(t, s.Allow(65534, 65534))
		out = asUser(65534, 65534, script)
	} else {
		b, _ := exec.Command("sh", "-c", script).CombinedOutput()
		out = string(b)
	}
	if !strings.Contains(out, "made") {
		s.Close()
		t.Fatalf("could not make the dirs: %s", out)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// peakRSS reads the process's peak resident set (VmHWM) in kB.
func peakRSS() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// 100,000 hostile calls with 64 × 256-byte arguments drove gatebridge to
// 6.8 GiB RSS and 1.6 GB of --json. Records are capped (max_records,
// max_record_bytes). By default 120 calls under small caps check the caps
// hold; GATEBRIDGE_FLOOD_BENCH=N floods N calls under the default limits
// and reports peak RSS (target ≤ 150 MB at 20,000) and the --json size
// (target ≤ 20 MB):
//
//	GATEBRIDGE_FLOOD_BENCH=20000 go test ./bridge -run TestFloodMemory -v
func TestFloodMemory(t *testing.T) {
	n, lim := 120, Limits{MaxRecords: 40, MaxRecordBytes: 1024}
	if v := os.Getenv("GATEBRIDGE_FLOOD_BENCH"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("GATEBRIDGE_FLOOD_BENCH=%q: want a number of calls", v)
		}
		lim = Limits{}
	}
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM
	before := peakRSS()
	s, err := Open(Config{Gates: testRegistry(t), Dir: t.TempDir(), Limits: lim})
	mustOK(t, err)
	defer s.Close()
	// Calls written by hand, never acknowledged, as fast as sh can.
	script := fmt.Sprintf(`T=$(mktemp -d); mkdir "$T/args"; a=$(head -c 256 /dev/zero | tr '\0' a)
i=0; while [ $i -lt 64 ]; do printf '%%s' "$a" > "$T/args/$i"; i=$((i+1)); done
cd "$GATEBRIDGE_CALLS_DIR"
i=0; while [ $i -lt %d ]; do i=$((i+1)); mkdir f$i; cp -r "$T/args" f$i/args; printf t_echo > f$i/gate; : > f$i/ready; done
rm -r "$T"`, n)
	start := time.Now()
	res, err := s.Run(context.Background(), shBackend{}, sandbox.Spec{Command: []string{"sh", "-c", script}})
	mustOK(t, err)
	js, err := json.Marshal(res)
	mustOK(t, err)
	peak := peakRSS()
	want := min(n, s.cfg.Limits.MaxRecords)
	t.Logf("%d calls of 64×256-byte args in %v: peak RSS %.1f MB (%.1f MB before), --json %.2f MB, %d records + %d omitted",
		n, time.Since(start).Round(time.Millisecond), float64(peak)/1024, float64(before)/1024, float64(len(js))/(1<<20), len(res.Calls), res.CallsOmitted)
	if len(res.Calls) != want || len(res.Calls)+res.CallsOmitted != n {
		t.Errorf("records %d + omitted %d, want %d of %d", len(res.Calls), res.CallsOmitted, want, n)
	}
	for _, c := range res.Calls {
		if b := len(strings.Join(c.Args, "")); b > s.cfg.Limits.MaxRecordBytes+200 {
			t.Fatalf("a record keeps %d argument bytes (max_record_bytes %d)", b, s.cfg.Limits.MaxRecordBytes)
		}
	}
	if peak > 150*1024 {
		t.Errorf("peak RSS %d kB > 150 MB", peak)
	}
	if len(js) > 20<<20 {
		t.Errorf("--json is %d bytes > 20 MB", len(js))
	}
}
