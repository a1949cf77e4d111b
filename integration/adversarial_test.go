package integration

// The adversarial suite: a hostile command inside the sandbox writes
// whatever it likes into calls/ (and tries responses/ and bin/), and each
// test asserts the exact outcome the Threat model in DESIGN.md promises.
// Cases are batched into as few sandbox runs as possible: one shell script
// per backend plants many raw calls and prints one line per call,
// "id|exit|stdout|stderr", read by advResults.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// advSecret is written to a host file the sandbox cannot see; it must never
// appear in any output, result or audit record.
const advSecret = "S3CRET-5f1e0c2a-do-not-leak"

// advPrelude defines raw protocol helpers for sandbox scripts:
// mk ID [GATE] makes a call dir with args/ and gate; pub ID writes ready;
// res ID waits (up to ~6s) for the answer and prints one result line.
const advPrelude = `
C=$GATEBRIDGE_CALLS_DIR; R=$GATEBRIDGE_RESPONSES_DIR; B=${R%/*}/bin; T=$TMPDIR
mk() { mkdir "$C/$1" "$C/$1/args" || echo "$1|MKFAIL||"; printf '%s' "${2:-gb_echo}" > "$C/$1/gate"; }
pub() { : > "$C/$1/ready"; }
res() {
	n=0
	while [ ! -f "$R/$1.exit" ]; do
		n=$((n+1)); [ $n -le ${2:-600} ] || { echo "$1|NOANSWER||"; return; }
		sleep 0.01
	done
	printf '%s|%s|%s|%s\n' "$1" "$(cat "$R/$1.exit")" \
		"$(head -c 300 "$R/$1.stdout" 2>/dev/null | tr '\n' ' ')" \
		"$(head -c 300 "$R/$1.stderr" 2>/dev/null | tr '\n' ' ')"
}
`

// advLine is one "id|exit|stdout|stderr" line.
type advLine struct{ exit, stdout, stderr string }

func advResults(stdout string) map[string]advLine {
	m := map[string]advLine{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "|", 4)
		for len(f) < 4 {
			f = append(f, "")
		}
		m[f[0]] = advLine{strings.TrimSpace(f[1]), strings.TrimSpace(f[2]), strings.TrimSpace(f[3])}
	}
	return m
}

// advHost makes the host-side bait: a secret file and a secret directory
// shaped like a call (gate, args/0, stdin, ready), outside anything the
// sandbox mounts, plus a host file and directory a planted link targets.
type advHost struct {
	secret, secretDir, target, targetDir, audit string
}

func newAdvHost(t *testing.T) advHost {
	t.Helper()
	d := t.TempDir()
	h := advHost{
		secret:    filepath.Join(d, "secret.txt"),
		secretDir: filepath.Join(d, "secretcall"),
		target:    filepath.Join(d, "target.txt"),
		targetDir: filepath.Join(d, "targetdir"),
		audit:     filepath.Join(d, "audit.jsonl"),
	}
	must(t, os.WriteFile(h.secret, []byte(advSecret+"\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(h.secretDir, "args"), 0o755))
	for _, f := range []string{"args/0", "stdin"} {
		must(t, os.WriteFile(filepath.Join(h.secretDir, f), []byte(advSecret), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(h.secretDir, "gate"), []byte("gb_echo"), 0o644))
	must(t, os.WriteFile(filepath.Join(h.secretDir, "ready"), nil, 0o644))
	must(t, os.WriteFile(h.target, []byte("untouched\n"), 0o644))
	must(t, os.Mkdir(h.targetDir, 0o755))
	return h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// noSecret fails if the secret shows up in any of texts.
func noSecret(t *testing.T, where string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, advSecret) {
			t.Errorf("the host secret leaked into %s", where)
		}
	}
}

// auditRecord is one line of the audit log: a call's record (no kind).
type auditRecord struct {
	Kind       string    `json:"kind"` // "command" and "approval" records are left out
	Time       time.Time `json:"time"`
	Session    string    `json:"session"`
	ID         string    `json:"id"`
	Gate       string    `json:"gate"`
	Args       []string  `json:"args"`
	ExitCode   int       `json:"exit_code"`
	Decision   string    `json:"decision"`
	DurationMS float64   `json:"duration_ms"`
	BytesIn    int64     `json:"bytes_in"`
	BytesOut   int64     `json:"bytes_out"`
	Error      string    `json:"error"`
}

func readAudit(t *testing.T, path string) (string, []auditRecord) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var recs []auditRecord
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r auditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %d is not JSON (%v): %q", i+1, err, line)
		}
		if r.Kind == "" {
			recs = append(recs, r)
		}
	}
	return string(b), recs
}

// gbPeak is gb with the peak resident set size (VmHWM, kB) of the
// gatebridge process, polled from /proc while it runs.
func gbPeak(t *testing.T, backend string, r Run) (Out, int64) {
	t.Helper()
	if r.Dir == "" {
		r.Dir = workspace(t)
	}
	bargs, benv := backendArgs(backend)
	args := append([]string{"run"}, bargs...)
	r.Env = append(benv, r.Env...)
	if r.Config != "" {
		p := filepath.Join(t.TempDir(), "gatebridge.yaml")
		must(t, os.WriteFile(p, []byte(r.Config), 0o644))
		args = append([]string{"--config", p}, args...)
	}
	args = append(append(append(args, r.Args...), "--"), r.Command...)
	if r.Timeout == 0 {
		r.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), r.Env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	must(t, cmd.Start())
	peak := make(chan int64, 1)
	stop := make(chan struct{})
	go func() {
		var hwm int64
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			if v := vmHWM(cmd.Process.Pid); v > hwm {
				hwm = v
			}
			select {
			case <-stop:
				peak <- hwm
				return
			case <-tk.C:
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gatebridge: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("gatebridge hung for %v; stderr: %s", r.Timeout, se.String())
	}
	return Out{so.String(), se.String(), code}, <-peak
}

func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// advSlowConfig adds a command gate that sleeps (for mid-dispatch cases)
// and the audit log.
func advSlowConfig(audit string, extra string) string {
	return fmt.Sprintf(`
gates:
  commands:
    - name: slowgate
      summary: sleeps a second
      command: [sleep, "1"]
audit:
  path: %s
%s`, audit, extra)
}

// TestAdversarialHostileEntries plants symlinks, FIFOs, sockets, devices,
// hard links, oversized and malformed entries from inside the sandbox, and
// checks each answer, the result, the audit log and host memory.
func TestAdversarialHostileEntries(t *testing.T) {
	forEachHostileBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		h := newAdvHost(t)
		q := quoteSh
		script := advPrelude + fmt.Sprintf(`
S=%s; SD=%s; HT=%s
# symlinks to a host secret, as every file of a call and as the call dir
mk symarg; ln -s "$S" "$C/symarg/args/0"; pub symarg
mk symgate; rm "$C/symgate/gate"; ln -s "$S" "$C/symgate/gate"; pub symgate
mk symstdin; ln -s "$S" "$C/symstdin/stdin"; pub symstdin
mk symready; ln -s "$SD/ready" "$C/symready/ready"
mkdir "$C/symargs"; printf gb_echo > "$C/symargs/gate"; ln -s "$SD/args" "$C/symargs/args"; pub symargs
ln -s "$SD" "$C/symdir"
# FIFOs, directories, sockets and devices where files are expected
mk fifoarg; mkfifo "$C/fifoarg/args/0"; pub fifoarg
mk fifogate; rm "$C/fifogate/gate"; mkfifo "$C/fifogate/gate"; pub fifogate
mk fifostdin; mkfifo "$C/fifostdin/stdin"; pub fifostdin
mk fifoready; mkfifo "$C/fifoready/ready"
mk dirgate; rm "$C/dirgate/gate"; mkdir "$C/dirgate/gate"; pub dirgate
mk devarg
if mknod "$C/devarg/args/0" c 1 3 2>/dev/null; then echo "mknod|ok"; pub devarg; else echo "mknod|refused"; rm -rf "$C/devarg"; fi
mk sockarg
if python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$C/sockarg/args/0" 2>/dev/null; then
	echo "socket|ok"; pub sockarg
else echo "socket|none"; rm -rf "$C/sockarg"; fi
# hard links: to a file elsewhere in calls/, and to the host secret
mkdir "$C/hold"; printf held > "$C/hold/f"
mk hlink; ln "$C/hold/f" "$C/hlink/args/0"; pub hlink
mk hsecret
if ln "$S" "$C/hsecret/args/0" 2>/dev/null; then echo "hsecretln|ok"; pub hsecret; else echo "hsecretln|refused"; rm -rf "$C/hsecret"; fi
# responses/ and bin/
if ln -s "$HT" "$R/presp.exit" 2>/dev/null; then echo "plantresp|ok"; else echo "plantresp|refused"; fi
mk presp; printf planted > "$C/presp/args/0"; pub presp
if touch "$B/evil" 2>/dev/null; then echo "plantbin|ok"; rm -f "$B/evil"; else echo "plantbin|refused"; fi
if touch "$R/evil" 2>/dev/null; then echo "plantresp2|ok"; rm -f "$R/evil"; else echo "plantresp2|refused"; fi
# oversized inputs
mk big1g; truncate -s 1G "$C/big1g/args/0"; pub big1g
mk manyargs; (cd "$C/manyargs/args" && seq 0 99999 | xargs touch); pub manyargs
mk bigstdin; truncate -s 1G "$C/bigstdin/stdin"; pub bigstdin
mk biggate; head -c 1048576 /dev/zero | tr '\0' a > "$C/biggate/gate"; pub biggate
gb_echo $(seq 5000) >/dev/null 2>"$T/e"; echo "wmany|$?||$(tr '\n' ' ' < "$T/e")"
head -c 17000000 /dev/zero | gb_echo >/dev/null 2>"$T/e"; echo "wstdin|$?||$(tr '\n' ' ' < "$T/e")"
rm -f "$T/e"
# malformed calls
mk a..b; printf dots > "$C/a..b/args/0"; pub a..b
mkdir "$C/.hidden"; printf gb_echo > "$C/.hidden/gate" 2>/dev/null; touch "$C/.hidden/ready" 2>/dev/null
mkdir "$C/nl
x" && touch "$C/nl
x/ready" 2>/dev/null
L=$(head -c 200 /dev/zero | tr '\0' x); mkdir "$C/$L"; touch "$C/$L/ready" 2>/dev/null
L4=$(head -c 4096 /dev/zero | tr '\0' y); if mkdir "$C/$L4" 2>/dev/null; then echo "id4k|created"; else echo "id4k|refused"; fi
mk gslash ../bin/gb_echo; pub gslash
mk gabs /bin/sh; pub gabs
mk gunk nope; pub gunk
mk gnl 'gb_echo
'; pub gnl
mk rba; rmdir "$C/rba/args"; pub rba
mk dup; printf once > "$C/dup/args/0"; pub dup; touch "$C/dup/ready" 2>/dev/null
mk rmmid slowgate; pub rmmid; sleep 0.3; rm -rf "$C/rmmid"
for id in symarg symgate symstdin symready symargs symdir fifoarg fifogate fifostdin fifoready dirgate devarg sockarg hlink hsecret presp big1g manyargs bigstdin biggate a..b gslash gabs gunk gnl rba dup rmmid; do
	case $id in devarg|sockarg|hsecret) [ -e "$R/$id.exit" ] || [ -e "$C/$id" ] || continue;; esac
	res $id
done
sleep 1.5
echo "left|$(ls -A "$C" | tr '\n' ' ')"
echo "planted|$(cat "$HT" 2>/dev/null)"
`, q(h.secret), q(h.secretDir), q(h.target))
		out, peak := gbPeak(t, backend, Run{
			Args:    []string{"--json"},
			Command: []string{"sh", "-c", script},
			Config:  advSlowConfig(h.audit, ""),
		})
		var res JSONResult
		if err := json.Unmarshal([]byte(out.Stdout), &res); err != nil {
			t.Fatalf("bad JSON (%v): %q; stderr %q", err, out.Stdout, out.Stderr)
		}
		auditText, audit := readAudit(t, h.audit)
		noSecret(t, "the --json result", out.Stdout)
		noSecret(t, "gatebridge's stderr", out.Stderr)
		noSecret(t, "the audit log", auditText)
		t.Logf("peak RSS %d kB; %d calls recorded", peak, len(res.Calls))
		if peak > 200<<10 {
			t.Errorf("gatebridge peak RSS %d kB, want < 200 MB", peak)
		}
		got := advResults(res.Stdout)
		sandboxed := backend != "local"
		defer func() {
			if t.Failed() {
				t.Logf("command stdout:\n%s\ncommand stderr:\n%s\ngatebridge stderr:\n%s", res.Stdout, res.Stderr, out.Stderr)
			}
		}()

		want := map[string][2]string{ // id → exit, stderr
			"symarg":    {"126", "gatebridge: call args/0 is a symbolic link (refused)"},
			"symgate":   {"126", "gatebridge: call gate is a symbolic link (refused)"},
			"symstdin":  {"126", "gatebridge: call stdin is a symbolic link (refused)"},
			"symready":  {"126", "gatebridge: call ready is a symbolic link (refused)"},
			"symargs":   {"126", "gatebridge: call args is a symbolic link (refused)"},
			"symdir":    {"126", "gatebridge: call symdir is a symbolic link (refused)"},
			"fifoarg":   {"126", "gatebridge: call args/0 is not a regular file (refused)"},
			"fifogate":  {"126", "gatebridge: call gate is not a regular file (refused)"},
			"fifostdin": {"126", "gatebridge: call stdin is not a regular file (refused)"},
			"fifoready": {"126", "gatebridge: call ready is not a regular file (refused)"},
			"dirgate":   {"126", "gatebridge: call gate is not a regular file (refused)"},
			"hlink":     {"126", "gatebridge: call args/0 has more than one hard link (refused)"},
			"presp":     {"0", ""},
			"big1g":     {"126", "gatebridge: arguments exceed 1048576 bytes (limit set by bridge.limits.max_arg_bytes)"},
			"manyargs":  {"126", "gatebridge: more than 4096 arguments (limit set by bridge.limits.max_args)"},
			"bigstdin":  {"126", "gatebridge: stdin exceeds 16777216 bytes (limit set by bridge.limits.max_stdin_bytes)"},
			"biggate":   {"2", "gatebridge: gate name longer than 64 bytes"},
			"wmany":     {"126", "gatebridge: more than 4096 arguments (limit set by bridge.limits.max_args)"},
			"wstdin":    {"126", "gatebridge: stdin exceeds 16777216 bytes (limit set by bridge.limits.max_stdin_bytes)"},
			"a..b":      {"0", ""},
			"gslash":    {"127", `gatebridge: unknown gate "../bin/gb_echo"`},
			"gabs":      {"127", `gatebridge: unknown gate "/bin/sh"`},
			"gunk":      {"127", `gatebridge: unknown gate "nope"`},
			"gnl":       {"127", `gatebridge: unknown gate "gb_echo\n"`},
			"rba":       {"0", ""},
			"dup":       {"0", ""},
			"rmmid":     {"0", ""},
		}
		if backend == dockerRunsc {
			// gVisor keeps a FIFO made inside in its own kernel: the host
			// sees no entry at all, so it never opens one. The call has no
			// such file (no argument, no stdin, no gate), and a FIFO ready
			// never publishes the call.
			want["fifoarg"] = [2]string{"0", ""}
			want["fifostdin"] = [2]string{"0", ""}
			want["fifogate"] = [2]string{"2", "gatebridge: call has neither argv (v2) nor gate (v1)"}
			want["fifoready"] = [2]string{"NOANSWER", ""}
		}
		if got["mknod"].exit == "ok" {
			if sandboxed {
				t.Errorf("mknod worked inside the %s sandbox (CAP_MKNOD not dropped)", backend)
			}
			want["devarg"] = [2]string{"126", "gatebridge: call args/0 is not a regular file (refused)"}
		} else if !sandboxed && os.Geteuid() == 0 {
			t.Errorf("mknod refused in local mode as root")
		}
		if got["socket"].exit == "ok" {
			want["sockarg"] = [2]string{"126", "gatebridge: call args/0 is not a regular file (refused)"}
		} else if !isDocker(backend) {
			t.Errorf("could not plant a socket (python3 missing?)")
		}
		if got["hsecretln"].exit == "ok" {
			if sandboxed {
				t.Errorf("%s sandbox could hard-link the host secret", backend)
			}
			want["hsecret"] = [2]string{"126", "gatebridge: call args/0 has more than one hard link (refused)"}
		}
		// Read-only mounts where the backend can; never a redirected write.
		for _, k := range []string{"plantresp", "plantbin", "plantresp2"} {
			wantRO := "refused"
			if !sandboxed {
				wantRO = "ok"
			}
			if got[k].exit != wantRO {
				t.Errorf("%s: got %q, want %q", k, got[k].exit, wantRO)
			}
		}
		if b, _ := os.ReadFile(h.target); string(b) != "untouched\n" {
			t.Errorf("a planted responses/ symlink redirected a host write: target now %q", b)
		}
		if got["id4k"].exit != "refused" {
			t.Errorf("id4k: %q", got["id4k"].exit)
		}
		for id, w := range want {
			g, ok := got[id]
			if !ok {
				t.Errorf("%s: no result line", id)
				continue
			}
			if g.exit != w[0] || g.stderr != w[1] {
				t.Errorf("%s: got exit %s stderr %q; want exit %s stderr %q", id, g.exit, g.stderr, w[0], w[1])
			}
		}
		for id, stdout := range map[string]string{"presp": "planted", "a..b": "dots", "dup": "once", "rba": ""} {
			if got[id].stdout != stdout {
				t.Errorf("%s: stdout %q, want %q", id, got[id].stdout, stdout)
			}
		}
		// Everything answered or rejected is gone from calls/, except the
		// never-ready dir and calls with more entries than the removal
		// budget (bridge.limits.max_args+64): manyargs and wmany's.
		left := map[string]bool{}
		for _, l := range strings.Fields(got["left"].exit + " " + got["left"].stdout) {
			left[l] = true
		}
		if !left["hold"] {
			t.Errorf("the never-ready call dir was removed")
		}
		for id := range want {
			// dup's second ready may land while the host removes the
			// answered call: the dir stays, recorded and answered once.
			if left[id] && id != "manyargs" && id != "dup" && (id != "fifoready" || backend != dockerRunsc) {
				t.Errorf("calls/ still holds %q after the run", id)
			}
		}
		for _, id := range []string{".hidden", "nl", "symdir"} {
			if left[id] {
				t.Errorf("calls/ still holds %q after the run", id)
			}
		}

		// Every attempt is recorded once, in the result and the audit log.
		count := map[string]int{}
		decision := map[string]string{}
		for _, c := range res.Calls {
			count[c.ID]++
			decision[c.ID] = c.Decision
		}
		if len(audit) != len(res.Calls) {
			t.Errorf("audit log has %d records, result %d", len(audit), len(res.Calls))
		}
		for _, r := range audit {
			if r.Session == "" || r.Time.IsZero() || r.Decision == "" {
				t.Errorf("incomplete audit record %+v", r)
			}
		}
		if count["dup"] != 1 {
			t.Errorf("dup (ready written twice) recorded %d times, want once", count["dup"])
		}
		for id, d := range map[string]string{"symarg": "rejected", "symdir": "rejected", "big1g": "rejected",
			"gunk": "unknown", "a..b": "ran", "rmmid": "ran", "presp": "ran"} {
			if decision[id] != d {
				t.Errorf("%s: decision %q, want %q", id, decision[id], d)
			}
		}
		for _, bad := range []string{`".hidden"`, `"nl\nx"`, strconv.Quote(strings.Repeat("x", 64)) + "…"} {
			if decision[bad] != "rejected" {
				t.Errorf("invalid id %s: decision %q, want rejected (calls: %v)", bad, decision[bad], count)
			}
		}
	})
}

// TestAdversarialResponsesReplaced: in local mode the command can rename
// responses/ and put a symlink to a host directory in its place; the host
// keeps writing into the directory it opened, never through the link.
func TestAdversarialResponsesReplaced(t *testing.T) {
	forEachHostileBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		h := newAdvHost(t)
		script := advPrelude + fmt.Sprintf(`
TD=%s
if mv "$R" "$R.old" 2>/dev/null; then echo "mv|ok"; else echo "mv|refused"; fi
if mv "$B" "$B.old" 2>/dev/null; then echo "mvbin|ok"; else echo "mvbin|refused"; fi
if [ -d "$R.old" ]; then
	ln -s "$TD" "$R"
	mk repl; printf x > "$C/repl/args/0"; pub repl
	R=$R.old; res repl
fi
`, quoteSh(h.targetDir))
		out := gb(t, backend, Run{Command: []string{"sh", "-c", script}, Config: advSlowConfig(h.audit, "")})
		got := advResults(out.Stdout)
		want := "refused"
		if backend == "local" {
			want = "ok"
			if g := got["repl"]; g.exit != "0" || g.stdout != "x" {
				t.Errorf("call after responses/ was replaced: %+v (stderr %s)", g, out.Stderr)
			}
		}
		if got["mv"].exit != want || got["mvbin"].exit != want {
			t.Errorf("moving responses/ and bin/: %q %q, want %q", got["mv"].exit, got["mvbin"].exit, want)
		}
		if ents, _ := os.ReadDir(h.targetDir); len(ents) != 0 {
			t.Errorf("host wrote through the planted responses/ link: %v", ents)
		}
	})
}

// TestAdversarialFlood creates 20,000 calls at once (more than the kernel's
// inotify queue of events in one burst): each is answered.
func TestAdversarialFlood(t *testing.T) {
	const n = 20000
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		q, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if q >= n {
			t.Logf("max_queued_events %d >= %d: the burst may not overflow the queue", q, n)
		}
	}
	for _, backend := range []string{"local", "bwrap"} {
		t.Run(backend, func(t *testing.T) {
			needBackend(t, backend)
			script := advPrelude + fmt.Sprintf(`
cd "$C"
seq 1 %d | sed 's/^/f/' > "$T/ids"
xargs mkdir < "$T/ids"
for i in $(cat "$T/ids"); do printf gb_echo > "$i/gate"; done
for i in $(cat "$T/ids"); do : > "$i/ready"; done
k=0
while :; do
	e=$(ls "$R" | grep -c '\.exit$')
	[ "$e" -lt %d ] || break
	k=$((k+1)); [ $k -lt 1200 ] || break
	sleep 0.1
done
echo "exits|$e"
echo "codes|$(cat "$R"/*.exit | sort | uniq -c | tr -s ' \n' '  ')"
`, n, n)
			start := time.Now()
			res, out := gbJSON(t, backend, Run{Command: []string{"sh", "-c", script}, Timeout: 3 * time.Minute})
			got := advResults(res.Stdout)
			t.Logf("%d calls in %v", n, time.Since(start))
			if got["exits"].exit != strconv.Itoa(n) {
				t.Fatalf("answered %s of %d calls; stderr %s", got["exits"].exit, n, out.Stderr)
			}
			if got["codes"].exit != fmt.Sprintf("%d 0", n) {
				t.Errorf("exit codes: %q", got["codes"].exit)
			}
			// --json keeps the first max_records (1000) and counts the rest.
			if len(res.Calls) != min(n, 1000) || len(res.Calls)+res.CallsOmitted != n {
				t.Errorf("recorded %d calls + %d omitted, want %d", len(res.Calls), res.CallsOmitted, n)
			}
		})
	}
}

// TestAdversarialFloodPastLimits floods far past max_calls and the id table
// (2*max_calls+max_scan_entries = 120 ids): every call still gets an
// answer, either its gate's or a refusal naming bridge.limits.max_calls, and
// the audit log accounts for every attempt (past the id table, the first in
// full and the rest in one summary record with their count).
func TestAdversarialFloodPastLimits(t *testing.T) {
	for _, backend := range []string{"local", "bwrap"} {
		t.Run(backend, func(t *testing.T) {
			needBackend(t, backend)
			h := newAdvHost(t)
			script := advPrelude + `
cd "$C"
seq 1 300 | sed 's/^/f/' > "$T/ids"
xargs mkdir < "$T/ids"
for i in $(cat "$T/ids"); do printf gb_echo > "$i/gate"; : > "$i/ready"; done
k=0
while :; do
	e=$(ls "$R" | grep -c '\.exit$')
	[ "$e" -lt 300 ] || break
	k=$((k+1)); [ $k -lt 300 ] || break
	sleep 0.1
done
echo "exits|$e"
echo "codes|$(cat "$R"/*.exit | sort | uniq -c | tr -s ' \n' '  ')"
echo "msgs|$(cat "$R"/*.stderr | sort | uniq -c | tr -s ' \n' '  ')"
`
			res, out := gbJSON(t, backend, Run{
				Command: []string{"sh", "-c", script},
				Config:  advSlowConfig(h.audit, "bridge:\n  limits:\n    max_calls: 10\n    max_scan_entries: 100\n"),
			})
			got := advResults(res.Stdout)
			if got["exits"].exit != "300" {
				t.Fatalf("answered %s of 300 calls; stderr %s", got["exits"].exit, out.Stderr)
			}
			if got["codes"].exit != "10 0 290 126" {
				t.Errorf("exit codes: %q", got["codes"].exit)
			}
			msgs := got["msgs"].exit
			if !strings.Contains(msgs, "(limit set by bridge.limits.max_calls)") || strings.Count(msgs, "gatebridge:") > 2 {
				t.Errorf("refusals: %q", msgs)
			}
			_, audit := readAudit(t, h.audit)
			tracked, ignored := 0, 0
			for _, r := range audit {
				switch {
				case r.ID == "":
					if _, err := fmt.Sscanf(r.Error, "%d call entries refused while the call table was full", &ignored); err != nil {
						t.Errorf("summary record: %+v", r)
					}
				case strings.Contains(r.Error, "call table full"):
				default:
					tracked++
				}
			}
			if tracked+ignored != 300 {
				t.Errorf("audit log accounts for %d+%d call attempts, want 300", tracked, ignored)
			}
		})
	}
}
