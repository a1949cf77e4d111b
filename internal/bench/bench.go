// Package bench measures gate calls from inside a sandbox: the round
// trip against the floor of any mailbox wrapper (a shell, mkdir, cat), poll
// mode, parallel callers, the CPU of a slow gate, the http gate against
// curl, the session overhead of `gatebridge run` and host memory.
// `gatebridge bench` prints its [Report].
//
// The bridge runs in the calling process (the memory row samples it); the
// sandboxed loops need bash.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/gates"
	"github.com/gatebridge/gatebridge/gates/httpgate"
	"github.com/gatebridge/gatebridge/sandbox"
)

// Options are the counts of a run (the flags of `gatebridge bench`).
type Options struct {
	N          int // sequential calls (round trip and floor, interleaved)
	K, M       int // parallel callers × calls each
	PollN      int // sequential calls in poll mode
	SlowN      int // calls to the 200 ms gate
	SessionN   int // runs of `run -- true` and `sh -c true`
	MemFirst   int // calls before the first RSS sample
	MemCalls   int // calls before the second RSS sample
	MemWorkers int // callers making the memory calls
	HTTPN      int // requests through the http gate, and with curl (0: no http row)
}

// Validate refuses counts a run cannot use.
func (o Options) Validate() error {
	if o.N < 1 || o.K < 1 || o.M < 1 || o.PollN < 1 || o.SlowN < 1 || o.SessionN < 1 || o.MemWorkers < 1 || o.MemCalls < 0 || o.HTTPN < 0 {
		return errors.New("bench: counts must be positive")
	}
	if o.MemCalls > 0 && o.MemFirst >= o.MemCalls {
		return errors.New("bench: --mem-first must be below --mem-calls")
	}
	return nil
}

// Report is the result of [Run]; `gatebridge bench --json` prints it.
type Report struct {
	Machine   Machine     `json:"machine"`
	Sandbox   string      `json:"sandbox"`
	Command   string      `json:"command"`
	RoundTrip *LatencyRow `json:"round_trip"`
	// Alone is the same wrapper against a mailbox no host watches, its
	// answer already written: what the shell itself costs, the least a
	// round trip can take with this wrapper in this sandbox.
	Alone    *LatencyRow  `json:"wrapper_alone"`
	Floor    *LatencyRow  `json:"floor"`
	Process  *LatencyRow  `json:"process_start"` // /bin/echo hello: one process start
	Poll     *LatencyRow  `json:"poll"`
	Parallel *ParallelRow `json:"parallel"`
	Slow     *SlowRow     `json:"slow_gate"`
	Session  *SessionRow  `json:"session"`
	HTTP     *HTTPRow     `json:"http_gate,omitempty"`
	Memory   *MemoryRow   `json:"memory"`
	Targets  []Target     `json:"targets"`
}

type Machine struct {
	CPUs   int    `json:"cpus"`
	Model  string `json:"cpu_model"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
}

// LatencyRow is N sequential calls from one sandboxed bash loop, each timed
// inside the sandbox with $EPOCHREALTIME around the command (so it includes
// bash's fork+exec of the wrapper, not the loop's own bookkeeping).
type LatencyRow struct {
	Calls       int     `json:"calls"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	MeanMS      float64 `json:"mean_ms"`
	CallsPerSec float64 `json:"calls_per_sec"` // 1 / mean latency
	Failed      int     `json:"failed"`
}

type ParallelRow struct {
	Callers     int     `json:"callers"`
	CallsEach   int     `json:"calls_each"`
	WallMS      float64 `json:"wall_ms"`
	CallsPerSec float64 `json:"calls_per_sec"`
	OK          int     `json:"ok"`
	FailedLost  int     `json:"failed_or_lost"`
}

type SlowRow struct {
	Calls         int     `json:"calls"`
	GateMS        float64 `json:"gate_ms"`
	WallPerCallMS float64 `json:"wall_per_call_ms"`
	// SandboxCPUPerCallMS is user+sys of the sandboxed shell and all its
	// children (wrappers and what they start), from bash's `times`.
	SandboxCPUPerCallMS float64 `json:"sandbox_cpu_per_call_ms"`
	// HostCPUPerCallMS is user+sys of the gatebridge process (the bridge
	// runs in-process) over the same interval, from getrusage(RUSAGE_SELF).
	HostCPUPerCallMS float64 `json:"host_cpu_per_call_ms"`
	Failed           int     `json:"failed"`
}

// HTTPRow is N GET requests to a server on 127.0.0.1 through the http
// gate, from the sandbox, against curl to the same server run N times by
// bash on the host (no sandbox has a network to run it in). The gate keeps
// its connection between calls; each curl opens one.
type HTTPRow struct {
	Gate  *LatencyRow `json:"gate"`
	Curl  *LatencyRow `json:"curl,omitempty"`  // nil without curl on the host
	Ratio float64     `json:"ratio,omitempty"` // gate p50 / curl p50
}

type SessionRow struct {
	Runs       int     `json:"runs"`
	GBMedianMS float64 `json:"run_true_median_ms"`
	ShMedianMS float64 `json:"sh_true_median_ms"`
	Ratio      float64 `json:"ratio"`
}

type MemoryRow struct {
	FirstCalls  int     `json:"first_calls"`
	Calls       int     `json:"calls"`
	RSSFirstMB  float64 `json:"rss_first_mb"`
	RSSLastMB   float64 `json:"rss_last_mb"`
	HeapFirstMB float64 `json:"heap_first_mb"` // live heap after a GC
	HeapLastMB  float64 `json:"heap_last_mb"`
	Failed      int     `json:"failed"`
}

type Target struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Value  string `json:"value"`
	Met    bool   `json:"met"`
}

// Env is what a run measures: the backend, and how the calling program
// sets up sessions and starts itself.
type Env struct {
	Backend sandbox.Backend
	// InsideWorkspace is where the sandbox sees a host workspace
	// (docker: /workspace); nil means at the same path.
	InsideWorkspace func(host string) string
	// SessionDir, Limits and RescanInterval configure each session as
	// bridge.Config does; MaxCalls is raised to what the run makes.
	SessionDir     string
	Limits         bridge.Limits
	RescanInterval time.Duration
	// RunCommand is the argv that runs a command with this backend
	// (gatebridge run --sandbox B …), for the session row; the run
	// appends --workspace WS -- true.
	RunCommand []string
	// Progress, when set, hears what is being measured.
	Progress func(what string)
}

// env is what every measurement shares.
type env struct {
	Env
	workspace string
	reg       *gates.Registry
	marks     *rssMarks
}

const slowGateDelay = 200 * time.Millisecond

// Run makes every measurement of o in a fresh temporary workspace, which
// it removes. The report's Command is left for the caller.
func Run(ctx context.Context, en Env, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if en.InsideWorkspace == nil {
		en.InsideWorkspace = func(host string) string { return host }
	}
	if en.Progress == nil {
		en.Progress = func(string) {}
	}
	// The bench makes far more calls than a default session allows.
	en.Limits.MaxCalls = max(en.Limits.MaxCalls, o.MemCalls+o.K*o.M+2*o.N+o.HTTPN+1000)
	ws, err := os.MkdirTemp("", "gb-bench-ws-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	os.Chmod(ws, 0o755)
	e := &env{Env: en, workspace: ws, marks: &rssMarks{}}
	if e.reg, err = benchRegistry(ws, en.InsideWorkspace(ws), e.marks); err != nil {
		return nil, err
	}
	rep := &Report{Machine: machineInfo(), Sandbox: en.Backend.Name()}
	// The rows, in order: whether it is measured, what progress says, how.
	steps := []struct {
		on   bool
		what string
		run  func() error
	}{
		{true, fmt.Sprintf("round trip and floor, %d calls each, interleaved", o.N), func() (err error) {
			rep.RoundTrip, rep.Alone, rep.Floor, rep.Process, err = e.roundTrip(ctx, o.N)
			return err
		}},
		{true, fmt.Sprintf("parallel, %d x %d calls", o.K, o.M), func() (err error) { rep.Parallel, err = e.parallel(ctx, o.K, o.M); return err }},
		{true, fmt.Sprintf("poll mode, %d calls", o.PollN), func() (err error) { rep.Poll, err = e.pollRoundTrip(ctx, o.PollN); return err }},
		{true, fmt.Sprintf("slow gate, %d calls", o.SlowN), func() (err error) { rep.Slow, err = e.slow(ctx, o.SlowN); return err }},
		{o.HTTPN > 0, fmt.Sprintf("http gate and curl, %d requests each", o.HTTPN), func() (err error) { rep.HTTP, err = e.httpRow(ctx, o.HTTPN); return err }},
		{true, fmt.Sprintf("session, %d runs each", o.SessionN), func() (err error) { rep.Session, err = e.session(ctx, o.SessionN); return err }},
		{o.MemCalls > 0, fmt.Sprintf("memory, %d calls", o.MemCalls), func() (err error) {
			rep.Memory, err = e.memory(ctx, o.MemFirst, o.MemCalls, o.MemWorkers)
			return err
		}},
	}
	for _, st := range steps {
		if !st.on {
			continue
		}
		e.Progress(st.what)
		if err := st.run(); err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep.Targets = rep.targets()
	return rep, nil
}

// benchRegistry holds the built-in gates (gb_echo among them), gb_slow (sleeps
// 200ms) and gb_mark (samples this process's memory).
func benchRegistry(ws, inside string, marks *rssMarks) (*gates.Registry, error) {
	reg := gates.NewRegistry()
	if err := gates.RegisterBuiltins(reg, gates.Options{Root: ws, SandboxRoot: inside}); err != nil {
		return nil, err
	}
	err := reg.Register(gates.Func(gates.Spec{Name: "gb_slow", Summary: "Sleep 200ms, print ok (bench)"},
		func(ctx context.Context, c *gates.Call) (int, error) {
			select {
			case <-time.After(slowGateDelay):
			case <-ctx.Done():
				return gates.ExitFailure, ctx.Err()
			}
			_, err := io.WriteString(c.Stdout, "ok\n")
			return 0, err
		}))
	if err != nil {
		return nil, err
	}
	err = reg.Register(gates.Func(gates.Spec{Name: "gb_mark", Summary: "Sample host memory (bench)"},
		func(_ context.Context, c *gates.Call) (int, error) {
			marks.sample()
			_, err := io.WriteString(c.Stdout, "ok\n")
			return 0, err
		}))
	return reg, err
}

// rssMarks are memory samples taken by the gb_mark gate.
type rssMarks struct {
	mu   sync.Mutex
	rss  []int64 // VmRSS bytes, as the kernel reports it (no GC forced first)
	heap []int64 // live heap bytes after runtime.GC
}

func (m *rssMarks) sample() {
	rss := vmRSS()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mu.Lock()
	m.rss = append(m.rss, rss)
	m.heap = append(m.heap, int64(ms.HeapAlloc))
	m.mu.Unlock()
}

func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// run opens a session (watch mode as given), runs bash -c script in the
// sandbox and returns its stdout. floor, when set, is written to the
// session's tmp/ as an executable script named floor.
func (e *env) run(ctx context.Context, watch bridge.WatchMode, script string, floor bool, args ...string) (string, *bridge.Session, error) {
	s, err := bridge.Open(bridge.Config{
		Gates:          e.reg,
		Dir:            e.SessionDir,
		Limits:         e.Limits,
		Watch:          watch,
		PollInterval:   10 * time.Millisecond,
		RescanInterval: e.RescanInterval,
	})
	if err != nil {
		return "", nil, err
	}
	defer s.Close()
	if floor {
		if err := writeFloor(s.Dirs().Tmp); err != nil {
			return "", nil, err
		}
	}
	res, err := s.Run(ctx, e.Backend, sandbox.Spec{
		Command:   append([]string{"bash", "-c", script, "bench"}, args...),
		Workspace: e.workspace,
		Timeout:   5 * time.Minute,
		MaxOutput: 16 << 20,
	})
	if err != nil {
		return "", nil, err
	}
	if res.ExitCode != 0 {
		return "", nil, fmt.Errorf("bench: sandboxed loop exited %d: %s", res.ExitCode, tail(res.Stderr, 500))
	}
	return res.Stdout, s, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// floorScript pays what any mailbox wrapper pays, without IPC: a shell,
// one directory (mkdir), the args written with builtins, a file printed
// with cat.
const floorScript = `#!/bin/sh
read -r i < /proc/sys/kernel/random/uuid
d=${TMPDIR:-/tmp}/floor-calls/$i
mkdir "$d"
n=0
for a do printf '%s' "$a" > "$d/$n"; n=$((n+1)); done
cat "${0%/*}/floor.out"
`

func writeFloor(tmp string) error {
	if err := os.Mkdir(filepath.Join(tmp, "floor-calls"), 0o777); err != nil {
		return err
	}
	os.Chmod(filepath.Join(tmp, "floor-calls"), 0o777)
	if err := os.WriteFile(filepath.Join(tmp, "floor.out"), []byte("hello\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(tmp, "floor"), []byte(floorScript), 0o755)
}

// seqScript calls each command given after N in turn, N times, timing each
// call with $EPOCHREALTIME and checking its output; it prints one line per
// call (T cmd start_us end_us, or F cmd exit output) and then `times`.
var seqScript = "n=$1; shift\no=${TMPDIR:-/tmp}/bench-out.$$\n" + timedCalls(`"$c" hello`) + "echo TIMES\ntimes\n"

// timedCalls is the loop of seqScript and httpScript: each command in
// "$@" in turn, n times, called as call (which names it "$c") with its
// output to "$o", timed with $EPOCHREALTIME and checked to be hello; one
// line per call (T cmd start_us end_us, or F cmd exit output).
func timedCalls(call string) string {
	return fmt.Sprintf(`log=
for ((i=0; i<n; i++)); do
	for c in "$@"; do
		a=$EPOCHREALTIME
		%s > "$o"; x=$?
		b=$EPOCHREALTIME
		r=; read -r r < "$o"
		if [ "$x" -eq 0 ] && [ "$r" = hello ]; then
			log+="T ${c##*/} ${a/[.,]/} ${b/[.,]/}"$'\n'
		else
			log+="F ${c##*/} $x ${r:0:40}"$'\n'
		fi
	done
done
printf '%%s' "$log"
`, call)
}

// latencies parses seqScript output into a row per command name.
func latencies(out string) (map[string]*LatencyRow, [4]float64, error) {
	durs := map[string][]float64{}
	rows := map[string]*LatencyRow{}
	var cpu [4]float64
	sc := bufio.NewScanner(strings.NewReader(out))
	inTimes := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if inTimes > 0 {
			if len(f) == 2 && inTimes <= 2 {
				cpu[2*(inTimes-1)] = parseTimes(f[0])
				cpu[2*(inTimes-1)+1] = parseTimes(f[1])
			}
			inTimes++
			continue
		}
		if len(f) == 1 && f[0] == "TIMES" {
			inTimes = 1
			continue
		}
		if len(f) < 3 {
			continue
		}
		r := rows[f[1]]
		if r == nil {
			r = &LatencyRow{}
			rows[f[1]] = r
		}
		r.Calls++
		if f[0] == "F" || len(f) != 4 {
			r.Failed++
			continue
		}
		a, err1 := strconv.ParseInt(f[2], 10, 64)
		b, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, cpu, fmt.Errorf("bench: bad timing line %q", sc.Text())
		}
		durs[f[1]] = append(durs[f[1]], float64(b-a)/1000)
	}
	for name, d := range durs {
		r := rows[name]
		slices.Sort(d)
		r.P50MS = round2(pct(d, 0.50))
		r.P99MS = round2(pct(d, 0.99))
		var sum float64
		for _, v := range d {
			sum += v
		}
		r.MeanMS = round2(sum / float64(len(d)))
		r.CallsPerSec = round2(1000 * float64(len(d)) / sum)
	}
	return rows, cpu, nil
}

// parseTimes reads one field of bash's `times` ("0m0.012s") in ms.
func parseTimes(s string) float64 {
	m, rest, ok := strings.Cut(strings.TrimSuffix(s, "s"), "m")
	if !ok {
		return 0
	}
	mi, _ := strconv.ParseFloat(m, 64)
	sec, _ := strconv.ParseFloat(strings.ReplaceAll(rest, ",", "."), 64)
	return (mi*60 + sec) * 1000
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// aloneScript prepares, in the sandbox's TMPDIR, N mailboxes that no host
// watches, each with a free call slot (its wake FIFO) and the answer to
// `gb_echo hello` already written (the exit file, $2); the function alone
// runs the session's gb_echo wrapper against the next one. One mkdir and
// one mkfifo make them all, before anything is timed.
const aloneScript = `fk=${TMPDIR:-/tmp}/wrapper-alone n=$1 exit=$2 w=$(command -v gb_echo) || exit 1
rm -rf "$fk"; set --
for ((i=0; i<n; i++)); do set -- "$@" "$fk/$i/calls/_1" "$fk/$i/responses"; done
mkdir -p "$@" || exit 1
set --; for ((i=0; i<n; i++)); do set -- "$@" "$fk/$i/calls/_1/wake"; done
mkfifo "$@" || exit 1
for ((i=0; i<n; i++)); do printf '%s' "$exit" > "$fk/$i/responses/_1.exit"; done
k=0
alone() {
	GATEBRIDGE_CALLS_DIR=$fk/$k/calls GATEBRIDGE_RESPONSES_DIR=$fk/$k/responses "$w" "$@"
	set -- $?; k=$((k+1)); return "$1"
}
`

func (e *env) roundTrip(ctx context.Context, n int) (rt, alone, floor, proc *LatencyRow, err error) {
	// The floor script is in the session's tmp/ (read-only inside bwrap
	// and docker); the directories it makes go to the sandbox's own TMPDIR.
	// /bin/echo is one process start in the same sandbox, the yardstick of
	// a call that starts no process besides its wrapper.
	exit, _ := mailbox.EncodeExit(2, mailbox.Answer{Stdout: []byte("hello\n")})
	script := aloneScript + `mkdir -p "${TMPDIR:-/tmp}/floor-calls"; set -- "$n" gb_echo alone "$GATEBRIDGE_SESSION_DIR/tmp/floor" /bin/echo; ` + seqScript
	out, sess, err := e.run(ctx, bridge.WatchAuto, script, true, strconv.Itoa(n), string(exit))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// Only the round trip's calls reach the host: a wrapper that did
	// not take the mailbox it was given would time the host instead.
	if recs, omitted := sess.Dispatcher().Records(); len(recs)+omitted != n {
		return nil, nil, nil, nil, fmt.Errorf("bench: the host answered %d calls, want the round trip's %d (did the wrapper-alone calls reach it?)", len(recs)+omitted, n)
	}
	rows, _, err := latencies(out)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	rt, alone, floor, proc = rows["gb_echo"], rows["alone"], rows["floor"], rows["echo"]
	if rt == nil || alone == nil || floor == nil || proc == nil {
		return nil, nil, nil, nil, fmt.Errorf("bench: round trip printed nothing: %s", tail(out, 300))
	}
	return rt, alone, floor, proc, nil
}

func (e *env) pollRoundTrip(ctx context.Context, n int) (*LatencyRow, error) {
	out, _, err := e.run(ctx, bridge.WatchPoll, seqScript, false, strconv.Itoa(n), "gb_echo")
	if err != nil {
		return nil, err
	}
	rows, _, err := latencies(out)
	if err != nil {
		return nil, err
	}
	if rows["gb_echo"] == nil {
		return nil, fmt.Errorf("bench: poll round trip printed nothing: %s", tail(out, 300))
	}
	return rows["gb_echo"], nil
}

// parScript starts K callers making M calls each, checks every output and
// prints "P ok wall_us".
const parScript = `k=$1 m=$2 t=${TMPDIR:-/tmp}
t0=$EPOCHREALTIME
for ((j=0; j<k; j++)); do
	(
		ok=0 o=$t/par.$j
		for ((i=0; i<m; i++)); do
			gb_echo "c$j-$i" > "$o" && read -r r < "$o" && [ "$r" = "c$j-$i" ] && ok=$((ok+1))
		done
		echo "$ok" > "$t/par.$j.ok"
	) &
done
wait
t1=$EPOCHREALTIME
ok=0
for ((j=0; j<k; j++)); do read -r x < "$t/par.$j.ok" && ok=$((ok+x)); done
echo "P $ok $(( ${t1/[.,]/} - ${t0/[.,]/} ))"
`

func (e *env) parallel(ctx context.Context, k, m int) (*ParallelRow, error) {
	out, _, err := e.run(ctx, bridge.WatchAuto, parScript, false, strconv.Itoa(k), strconv.Itoa(m))
	if err != nil {
		return nil, err
	}
	var ok, wallUS int64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "P %d %d", &ok, &wallUS); err != nil {
		return nil, fmt.Errorf("bench: parallel printed %q", tail(out, 300))
	}
	total := k * m
	return &ParallelRow{Callers: k, CallsEach: m, WallMS: round2(float64(wallUS) / 1000),
		CallsPerSec: round2(float64(total) / (float64(wallUS) / 1e6)), OK: int(ok), FailedLost: total - int(ok)}, nil
}

// slowScript calls gb_slow N times, then prints `times`: user and sys of
// the shell and of all its (waited-for) children, i.e. every wrapper.
const slowScript = `n=$1 o=${TMPDIR:-/tmp}/slow.out f=0
t0=$EPOCHREALTIME
for ((i=0; i<n; i++)); do
	gb_slow > "$o" && read -r r < "$o" && [ "$r" = ok ] || f=$((f+1))
done
t1=$EPOCHREALTIME
echo "S $f $(( ${t1/[.,]/} - ${t0/[.,]/} ))"
echo TIMES
times
`

func (e *env) slow(ctx context.Context, n int) (*SlowRow, error) {
	before := cpuSelf()
	out, _, err := e.run(ctx, bridge.WatchAuto, slowScript, false, strconv.Itoa(n))
	if err != nil {
		return nil, err
	}
	host := cpuSelf() - before
	var failed, wallUS int64
	if _, err := fmt.Sscanf(out, "S %d %d", &failed, &wallUS); err != nil {
		return nil, fmt.Errorf("bench: slow gate printed %q", tail(out, 300))
	}
	_, cpu, err := latencies(out)
	if err != nil {
		return nil, err
	}
	sandboxCPU := cpu[0] + cpu[1] + cpu[2] + cpu[3]
	return &SlowRow{Calls: n, GateMS: float64(slowGateDelay.Milliseconds()),
		WallPerCallMS:       round2(float64(wallUS) / 1000 / float64(n)),
		SandboxCPUPerCallMS: round2(sandboxCPU / float64(n)),
		HostCPUPerCallMS:    round2(host.Seconds() * 1000 / float64(n)),
		Failed:              int(failed)}, nil
}

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// session times the real binary, `gatebridge run … -- true` (see
// [Env.RunCommand]), against `sh -c true`, alternating, as subprocesses.
func (e *env) session(ctx context.Context, runs int) (*SessionRow, error) {
	if len(e.RunCommand) == 0 {
		return nil, errors.New("bench: no RunCommand for the session row")
	}
	gbArgs := append(slices.Clone(e.RunCommand[1:]), "--workspace", e.workspace, "--", "true")
	var gb, sh []float64
	for range runs {
		d, err := timeCmd(ctx, e.RunCommand[0], gbArgs...)
		if err != nil {
			return nil, fmt.Errorf("bench: %s %s: %w", e.RunCommand[0], strings.Join(gbArgs, " "), err)
		}
		gb = append(gb, d)
		if d, err = timeCmd(ctx, "sh", "-c", "true"); err != nil {
			return nil, err
		}
		sh = append(sh, d)
	}
	slices.Sort(gb)
	slices.Sort(sh)
	g, s := pct(gb, 0.5), pct(sh, 0.5)
	return &SessionRow{Runs: runs, GBMedianMS: round2(g), ShMedianMS: round2(s), Ratio: round2(g / s)}, nil
}

func timeCmd(ctx context.Context, name string, args ...string) (float64, error) {
	c := exec.CommandContext(ctx, name, args...)
	var errb bytes.Buffer
	c.Stderr = &errb
	start := time.Now()
	if err := c.Run(); err != nil {
		return 0, fmt.Errorf("%w: %s", err, tail(errb.String(), 300))
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

// memScript makes FIRST calls, asks gb_mark to sample host memory, makes
// the rest up to TOTAL, and samples again; W callers share the work.
const memScript = `first=$1 total=$2 w=$3 t=${TMPDIR:-/tmp}
batch() {
	local n=$1 j
	for ((j=0; j<w; j++)); do
		(
			f=0 o=$t/mem.$j
			for ((i=j; i<n; i+=w)); do
				gb_echo hello > "$o" && read -r r < "$o" && [ "$r" = hello ] || f=$((f+1))
			done
			echo "$f" > "$t/mem.$j.f"
		) &
	done
	wait
	for ((j=0; j<w; j++)); do read -r x < "$t/mem.$j.f" && fail=$((fail+x)); done
}
fail=0
batch "$first"
gb_mark > /dev/null || fail=$((fail+1))
batch "$((total-first))"
gb_mark > /dev/null || fail=$((fail+1))
echo "M $fail"
`

func (e *env) memory(ctx context.Context, first, total, workers int) (*MemoryRow, error) {
	e.marks.mu.Lock()
	e.marks.rss, e.marks.heap = nil, nil
	e.marks.mu.Unlock()
	debug.FreeOSMemory()
	out, _, err := e.run(ctx, bridge.WatchAuto, memScript, false, strconv.Itoa(first), strconv.Itoa(total), strconv.Itoa(workers))
	if err != nil {
		return nil, err
	}
	var failed int
	if _, err := fmt.Sscanf(out, "M %d", &failed); err != nil {
		return nil, fmt.Errorf("bench: memory printed %q", tail(out, 300))
	}
	e.marks.mu.Lock()
	defer e.marks.mu.Unlock()
	if len(e.marks.rss) != 2 {
		return nil, fmt.Errorf("bench: memory: %d samples, want 2", len(e.marks.rss))
	}
	mb := func(b int64) float64 { return round2(float64(b) / (1 << 20)) }
	return &MemoryRow{FirstCalls: first, Calls: total, Failed: failed,
		RSSFirstMB: mb(e.marks.rss[0]), RSSLastMB: mb(e.marks.rss[1]),
		HeapFirstMB: mb(e.marks.heap[0]), HeapLastMB: mb(e.marks.heap[1])}, nil
}

func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}

func (r *Report) targets() []Target {
	var t []Target
	add := func(name, target, value string, met bool) {
		t = append(t, Target{name, target, value, met})
	}
	if r.RoundTrip != nil && r.Floor != nil && r.Floor.P50MS > 0 {
		x := r.RoundTrip.P50MS / r.Floor.P50MS
		add("round trip vs floor", "p50 <= 1.4x floor", fmt.Sprintf("%.2fx", x), x <= 1.4 && r.RoundTrip.Failed == 0)
	}
	if r.RoundTrip != nil && r.Process != nil && r.Process.P50MS > 0 {
		x := r.RoundTrip.P50MS / r.Process.P50MS
		add("round trip vs process start", "p50 <= 1.5x /bin/echo", fmt.Sprintf("%.2fx", x), x <= 1.5 && r.RoundTrip.Failed == 0)
	}
	if r.RoundTrip != nil && r.Poll != nil && r.RoundTrip.P50MS > 0 {
		x := r.Poll.P50MS / r.RoundTrip.P50MS
		add("events vs poll", ">= 2x faster than poll at 10ms", fmt.Sprintf("%.2fx", x), x >= 2)
	}
	if r.Parallel != nil && r.RoundTrip != nil {
		add("parallel", fmt.Sprintf("%dx%d: 0 lost, calls/s >= sequential", r.Parallel.Callers, r.Parallel.CallsEach),
			fmt.Sprintf("%d lost, %.0f vs %.0f calls/s", r.Parallel.FailedLost, r.Parallel.CallsPerSec, r.RoundTrip.CallsPerSec),
			r.Parallel.FailedLost == 0 && r.Parallel.CallsPerSec >= r.RoundTrip.CallsPerSec)
	}
	if r.Slow != nil {
		add("slow gate CPU", "<= 10 ms per call (sandbox tree)", fmt.Sprintf("%.2f ms", r.Slow.SandboxCPUPerCallMS),
			r.Slow.SandboxCPUPerCallMS <= 10 && r.Slow.Failed == 0)
	}
	if r.Session != nil {
		add("session overhead", "run -- true <= 3x sh -c true", fmt.Sprintf("%.2fx", r.Session.Ratio), r.Session.Ratio <= 3)
	}
	if r.Memory != nil {
		d := r.Memory.RSSLastMB - r.Memory.RSSFirstMB
		add("memory", fmt.Sprintf("RSS after %d within 10 MB of after %d", r.Memory.Calls, r.Memory.FirstCalls),
			fmt.Sprintf("%+.1f MB", d), d <= 10 && r.Memory.Failed == 0)
	}
	return t
}

// Print writes r as two tables: the rows, then the targets.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "gatebridge bench: sandbox %s; %d CPUs, %s, kernel %s, %s\n\n", r.Sandbox, r.Machine.CPUs, r.Machine.Model, r.Machine.Kernel, r.Machine.Go)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tcalls\tp50 ms\tp99 ms\tcalls/s\tfailed\tnotes")
	lat := func(name string, l *LatencyRow, note string) {
		if l != nil {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.0f\t%d\t%s\n", name, l.Calls, l.P50MS, l.P99MS, l.CallsPerSec, l.Failed, note)
		}
	}
	lat("round trip", r.RoundTrip, "gb_echo hello, events + FIFO wake")
	lat("wrapper alone", r.Alone, "the same wrapper, answer already written: no host")
	lat("floor", r.Floor, "sh + mkdir + cat, no IPC")
	lat("process start", r.Process, "/bin/echo hello: one process start")
	lat("poll mode", r.Poll, "bridge.watch=poll, 10ms")
	if p := r.Parallel; p != nil {
		fmt.Fprintf(tw, "parallel\t%dx%d\t\t\t%.0f\t%d\t%.0f ms wall\n", p.Callers, p.CallsEach, p.CallsPerSec, p.FailedLost, p.WallMS)
	}
	if s := r.Slow; s != nil {
		fmt.Fprintf(tw, "slow gate\t%d\t%.1f\t\t\t%d\twall/call; CPU/call: sandbox %.2f ms, host %.2f ms\n", s.Calls, s.WallPerCallMS, s.Failed, s.SandboxCPUPerCallMS, s.HostCPUPerCallMS)
	}
	if h := r.HTTP; h != nil {
		note := "GET to 127.0.0.1 from the sandbox; no curl on the host to compare"
		if h.Curl != nil {
			note = fmt.Sprintf("curl to it from the host: p50 %.2f ms, p99 %.2f ms; %.2fx", h.Curl.P50MS, h.Curl.P99MS, h.Ratio)
		}
		lat("http gate", h.Gate, note)
	}
	if s := r.Session; s != nil {
		fmt.Fprintf(tw, "session\t%d\t%.2f\t\t\t\trun -- true (median); sh -c true %.2f ms; %.2fx\n", s.Runs, s.GBMedianMS, s.ShMedianMS, s.Ratio)
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(tw, "memory\t%d\t\t\t\t%d\tRSS %.1f MB after %d, %.1f MB after %d (heap %.1f → %.1f MB)\n",
			m.Calls, m.Failed, m.RSSFirstMB, m.FirstCalls, m.RSSLastMB, m.Calls, m.HeapFirstMB, m.HeapLastMB)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "target\twant\tgot\tmet")
	for _, t := range r.Targets {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Target, t.Value, met)
	}
	tw.Flush()
}

// httpScript is seqScript for requests: it runs each command given after
// N and URL as `CMD -s URL`, N times, and the server answers hello.
var httpScript = "n=$1 u=$2; shift 2\no=${TMPDIR:-/tmp}/bench-http.$$\n" + timedCalls(`"$c" -s "$u"`)

// httpRow serves "hello" on 127.0.0.1, makes an http gate for it (in the
// session's registry, while the row runs), and times n requests through
// it from the sandbox and n with curl from the host.
func (e *env) httpRow(ctx context.Context, n int) (*HTTPRow, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }),
		ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	g, err := httpgate.New(ctx, httpgate.Config{Name: "http", Rules: []httpgate.Rule{{URL: url, AllowPrivate: true}}}, gates.Env{})
	if err != nil {
		return nil, err
	}
	if err := e.reg.Register(g); err != nil {
		g.Close()
		return nil, err
	}
	defer e.reg.Unregister("http")
	out, _, err := e.run(ctx, bridge.WatchAuto, httpScript, false, strconv.Itoa(n), url, "http")
	if err != nil {
		return nil, err
	}
	rows, _, err := latencies(out)
	if err != nil {
		return nil, err
	}
	row := &HTTPRow{Gate: rows["http"]}
	if row.Gate == nil {
		return nil, fmt.Errorf("bench: http row printed nothing: %s", tail(out, 300))
	}
	if _, err := exec.LookPath("curl"); err != nil {
		return row, nil
	}
	tmp, err := os.MkdirTemp("", "gb-bench-curl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	c := exec.CommandContext(ctx, "bash", "-c", httpScript, "bench", strconv.Itoa(n), url, "curl")
	c.Env = append(os.Environ(), "TMPDIR="+tmp)
	b, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("bench: curl loop: %w", err)
	}
	if rows, _, err = latencies(string(b)); err != nil {
		return nil, err
	}
	if row.Curl = rows["curl"]; row.Curl != nil && row.Curl.P50MS > 0 {
		row.Ratio = round2(row.Gate.P50MS / row.Curl.P50MS)
	}
	return row, nil
}
