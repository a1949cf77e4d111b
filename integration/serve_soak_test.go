package integration

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/rpc"
)

// TestServeSoak: 10 sandboxes × 10 processes in one `gatebridge serve`,
// each streaming 10 MB and making gate calls that the client answers.
// Every byte arrives in order (the SHA-256 each process computes inside
// matches the bytes received); it reports throughput, gate round-trip
// latency as the caller sees it (p50, p99) and the server's peak RSS.
// A soak run for make bench: GATEBRIDGE_SOAK=1.
func TestServeSoak(t *testing.T) {
	if os.Getenv("GATEBRIDGE_SOAK") == "" {
		t.Skip("a soak run: GATEBRIDGE_SOAK=1 (make bench)")
	}
	sandboxes, procs, mb, calls := 10, 10, 10, 20
	if v := os.Getenv("GATEBRIDGE_SOAK_SIZE"); v != "" { // "S,P,MB,CALLS"
		fmt.Sscanf(v, "%d,%d,%d,%d", &sandboxes, &procs, &mb, &calls)
	}
	backend := os.Getenv("GATEBRIDGE_SOAK_BACKEND")
	if backend == "" {
		backend = "local"
	}
	needBackend(t, backend)
	cmd := exec.Command(binary, "serve", "--stdio")
	cmd.Dir = os.TempDir()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	var wmu sync.Mutex
	send := func(m rpc.Message) {
		m.JSONRPC = "2.0"
		b, _ := json.Marshal(m)
		wmu.Lock()
		defer wmu.Unlock()
		in.Write(append(b, '\n'))
	}
	var nextID int
	request := func(method string, params any) {
		nextID++
		p, _ := json.Marshal(params)
		send(rpc.Message{ID: json.RawMessage(strconv.Itoa(nextID)), Method: method, Params: p})
	}

	type state struct {
		h      hash.Hash
		n      int64
		stderr []byte
	}
	hashes := map[string]*state{}
	exited := make(chan struct{})
	errs := make(chan string, 1000)
	go func() {
		defer close(exited)
		br := bufio.NewReaderSize(out, 1<<20)
		left := sandboxes * procs
		for left > 0 {
			line, err := br.ReadBytes('\n')
			if err != nil {
				errs <- "serve ended: " + err.Error()
				return
			}
			var m rpc.Message
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			if m.Error != nil {
				errs <- fmt.Sprintf("error response %s: %s", m.ID, m.Error.Message)
				left-- // every request but these 100 process/starts succeeds: stop waiting for one
			}
			switch m.Method {
			case rpc.MethodProcessOutput:
				var p rpc.ProcessOutputParams
				json.Unmarshal(m.Params, &p)
				st := hashes[p.ProcessID]
				if st == nil {
					st = &state{h: sha256.New()}
					hashes[p.ProcessID] = st
				}
				if p.Stream == "stdout" {
					st.h.Write(p.Chunk)
					st.n += int64(len(p.Chunk))
				} else {
					st.stderr = append(st.stderr, p.Chunk...)
				}
			case rpc.MethodGateCall:
				r, _ := json.Marshal(rpc.GateCallResult{Stdout: []byte("ok\n")})
				send(rpc.Message{ID: m.ID, Result: r})
			case rpc.MethodProcessExited:
				var p rpc.ProcessExitedParams
				json.Unmarshal(m.Params, &p)
				if p.ExitCode != 0 {
					errs <- fmt.Sprintf("%s exited %d", p.ProcessID, p.ExitCode)
				}
				left--
			}
		}
	}()
	request(rpc.MethodInitialize, rpc.InitializeParams{ClientName: "soak", ProtocolVersion: 1})
	request(rpc.MethodGateRegister, rpc.GateRegisterParams{Name: "tick"})
	for s := 0; s < sandboxes; s++ {
		request(rpc.MethodSandboxOpen, rpc.SandboxOpenParams{SandboxID: fmt.Sprint("sb", s), Backend: backend, Workspace: workspace(t)})
	}
	// Inside: 10 MB and its hash, then timed gate calls (the caller's view:
	// date +%s%N around each call, written to stderr).
	script := fmt.Sprintf(`f=$(mktemp); head -c %d /dev/urandom > "$f"; sha256sum < "$f" >&2; cat "$f"; rm "$f"
i=0; while [ $i -lt %d ]; do a=$(date +%%s%%N); tick >/dev/null; b=$(date +%%s%%N); echo "lat $((b-a))" >&2; i=$((i+1)); done`, mb<<20, calls)
	start := time.Now()
	for s := 0; s < sandboxes; s++ {
		for p := 0; p < procs; p++ {
			request(rpc.MethodProcessStart, rpc.ProcessStartParams{ProcessID: fmt.Sprintf("s%dp%d", s, p), SandboxID: fmt.Sprint("sb", s), Argv: []string{"sh", "-c", script}})
		}
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Minute):
		cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on stderr
		time.Sleep(time.Second)
		t.Fatal("soak did not finish in 5 minutes")
	}
	elapsed := time.Since(start)
	peak := vmHWM(cmd.Process.Pid) << 10 // the server still runs
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var lat []float64
	for id, st := range hashes {
		got := hex.EncodeToString(st.h.Sum(nil))
		if st.n != int64(mb)<<20 || !strings.Contains(string(st.stderr), got) {
			t.Errorf("%s: %d bytes, sha256 %s; inside: %.80q", id, st.n, got, st.stderr)
		}
		for _, l := range strings.Split(string(st.stderr), "\n") {
			if v, ok := strings.CutPrefix(l, "lat "); ok {
				if ns, err := strconv.ParseFloat(v, 64); err == nil {
					lat = append(lat, ns/1e6)
				}
			}
		}
	}
	if len(hashes) != sandboxes*procs || len(lat) != sandboxes*procs*calls {
		t.Errorf("%d processes reported, %d gate calls timed", len(hashes), len(lat))
	}
	sort.Float64s(lat)
	if len(lat) > 0 {
		t.Logf("%s: %d processes × %d MB in %v (%.0f MB/s through the protocol); %d gate calls: p50 %.1f ms, p99 %.1f ms (date to date inside, two process starts included); server peak RSS %d MiB",
			backend, sandboxes*procs, mb, elapsed.Round(time.Millisecond), float64(sandboxes*procs*mb)/elapsed.Seconds(),
			len(lat), lat[len(lat)/2], lat[len(lat)*99/100], peak>>20)
	}
}
