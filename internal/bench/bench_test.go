package bench

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

func TestOptionsValidate(t *testing.T) {
	ok := Options{N: 1, K: 1, M: 1, PollN: 1, SlowN: 1, SessionN: 1, MemFirst: 1, MemCalls: 2, MemWorkers: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(o *Options){
		func(o *Options) { o.N = 0 },
		func(o *Options) { o.MemCalls = -1 },
		func(o *Options) { o.MemFirst = 2 },
		func(o *Options) { o.HTTPN = -1 },
	} {
		o := ok
		bad(&o)
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	o := ok
	o.MemCalls, o.MemFirst = 0, 5 // no memory row: MemFirst does not matter
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
}

func TestLatencies(t *testing.T) {
	out := "T gb_echo 1000000 1002000\nT floor 1002000 1003000\nT gb_echo 1003000 1007000\nF floor 1 x\nTIMES\n0m0.010s 0m0.020s\n0m1.500s 0m0,500s\n"
	rows, cpu, err := latencies(out)
	if err != nil {
		t.Fatal(err)
	}
	e, f := rows["gb_echo"], rows["floor"]
	if e.Calls != 2 || e.Failed != 0 || e.P50MS != 2 || e.P99MS != 4 || e.MeanMS != 3 {
		t.Errorf("gb_echo = %+v", e)
	}
	if f.Calls != 2 || f.Failed != 1 || f.P50MS != 1 {
		t.Errorf("floor = %+v", f)
	}
	if cpu != [4]float64{10, 20, 1500, 500} {
		t.Errorf("cpu = %v", cpu)
	}
	if _, _, err := latencies("T gb_echo x y\n"); err == nil {
		t.Error("bad timing line accepted")
	}
}

// A tiny run against the local backend fills every row, and Print shows
// them with the targets.
func TestRunLocal(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	var progress []string
	rep, err := Run(context.Background(), Env{
		Backend:        local.New(),
		SessionDir:     t.TempDir(),
		Limits:         bridge.DefaultLimits(),
		RescanInterval: time.Second,
		RunCommand:     []string{"true"}, // stands in for gatebridge run
		Progress:       func(w string) { progress = append(progress, w) },
	}, Options{N: 3, K: 2, M: 2, PollN: 2, SlowN: 1, SessionN: 1, MemFirst: 2, MemCalls: 4, MemWorkers: 1, HTTPN: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sandbox != "local" || rep.RoundTrip.Calls != 3 || rep.Alone.Calls != 3 || rep.Alone.Failed != 0 || rep.Floor.Calls != 3 || rep.Process.Calls != 3 || rep.RoundTrip.Failed != 0 ||
		rep.Poll.Calls != 2 || rep.Parallel.OK != 4 || rep.Slow.Calls != 1 || rep.Session.Runs != 1 ||
		rep.Memory == nil || rep.Memory.Failed != 0 || len(rep.Targets) != 7 || len(progress) != 7 ||
		rep.HTTP == nil || rep.HTTP.Gate.Calls != 2 || rep.HTTP.Gate.Failed != 0 {
		t.Fatalf("report: %+v (progress %q)", rep, progress)
	}
	if _, err := exec.LookPath("curl"); err == nil && (rep.HTTP.Curl == nil || rep.HTTP.Curl.Calls != 2 || rep.HTTP.Curl.Failed != 0 || rep.HTTP.Ratio <= 0) {
		t.Errorf("curl half of the http row: %+v", rep.HTTP.Curl)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{"gatebridge bench: sandbox local;", "round trip", "wrapper alone", "floor", "poll mode", "parallel", "slow gate", "session", "memory", "target", "round trip vs floor", "process start", "round trip vs process start", "http gate"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}
