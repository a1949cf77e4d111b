package bridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/gates"
)

// A gate's output reaches its caller while the gate runs: the caller reads
// the first line and reports it (t_mark) long before the gate writes the
// second. Every byte arrives, in order per stream, also what a stream
// cannot carry (after it, in the answer).
func TestOutputStreams(t *testing.T) {
	wrote := make(chan time.Time, 1)
	marked := make(chan time.Time, 1)
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_slow", Timeout: time.Minute}, func(ctx context.Context, c *gates.Call) (int, error) {
		c.Stdout.Write([]byte("one\npart"))
		c.Stderr.Write([]byte("err1\n"))
		select {
		case wrote <- time.Now():
		default:
		}
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return 1, ctx.Err()
		}
		c.Stdout.Write([]byte("ial\n"))
		if len(c.Args) > 0 {
			c.Stdout.Write([]byte("caf\xc3\xa9\x00bin\n")) // not streamable: held
			c.Stdout.Write([]byte("after\n"))
		}
		c.Stdout.Write([]byte("end"))
		return 3, nil
	}))
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_mark"}, func(ctx context.Context, c *gates.Call) (int, error) {
		select {
		case marked <- time.Now():
		default:
		}
		return 0, nil
	}))
	res := run(t, Config{Gates: reg}, `t_slow 2>err.txt | { IFS= read -r l; t_mark; echo "first=$l"; cat; }; echo "rc=$?"
t_slow bin 2>>err.txt | base64 -w0; echo; cat err.txt`)
	var w, m time.Time
	select {
	case w = <-wrote:
		m = <-marked
	default:
		t.Fatalf("gate did not run: %+v", res)
	}
	t.Logf("first line read %v after the gate wrote it (the gate then sleeps 2 s)", m.Sub(w))
	if m.Sub(w) > time.Second {
		t.Errorf("first line reached the caller %v after it was written: not streamed", m.Sub(w))
	}
	want := "first=one\npartial\nend" + "rc=0\n" +
		base64.StdEncoding.EncodeToString([]byte("one\npartial\ncaf\xc3\xa9\x00bin\nafter\nend")) + "\n" +
		"err1\nerr1\n"
	if res.Stdout != want {
		t.Errorf("stdout\n%q\nwant\n%q", res.Stdout, want)
	}
	for _, c := range res.Calls {
		if c.Gate == "t_slow" && (c.ExitCode != 3 || c.Decision != DecisionRan) {
			t.Errorf("call %+v", c)
		}
	}
}

// Past streamMax a call's output stops streaming and the rest comes with
// the answer (printed with cat): still every byte, in order.
func TestStreamCapHoldsTheRest(t *testing.T) {
	var want bytes.Buffer
	for i := 0; want.Len() < 3*streamMax; i++ {
		fmt.Fprintf(&want, "line %d of a slow gate's bulk output\n", i)
	}
	reg := gates.NewRegistry()
	reg.MustRegister(gates.Func(gates.Spec{Name: "t_bulk"}, func(ctx context.Context, c *gates.Call) (int, error) {
		time.Sleep(2 * streamAfter)
		b := want.Bytes()
		for len(b) > 0 {
			n := min(len(b), 4096)
			c.Stdout.Write(b[:n])
			b = b[n:]
		}
		return 0, nil
	}))
	res := run(t, Config{Gates: reg}, `t_bulk | sha256sum`)
	sum := sha256.Sum256(want.Bytes())
	if got := strings.Fields(res.Stdout); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
		t.Errorf("stdout %q: want sha256 %x of %d bytes", res.Stdout, sum, want.Len())
	}
	if res.Calls[0].BytesOut < int64(want.Len()) {
		t.Errorf("record: %d bytes out, want at least %d", res.Calls[0].BytesOut, want.Len())
	}
}
