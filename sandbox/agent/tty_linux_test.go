package agent_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/agent"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

// The Go agent opens a terminal inside the sandbox (here: on this host).
func TestTTY(t *testing.T) {
	c, _ := startAgent(t)
	sandboxtest.RunTTY(t, func(*testing.T) sandbox.Backend {
		return writable{&agent.Attached{Conn: c, Root: "/"}}
	}, sandboxtest.Options{})
}

// The sh agent cannot: it says so, naming the agent backend, and runs
// nothing, for a terminal as for an argv[0].
func TestTTYShRefused(t *testing.T) {
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			c, _ := startShAgent(t, sh)
			b := writable{&agent.Attached{Conn: c, Root: "/"}}
			sandboxtest.RunTTYRefused(t, b, sandboxtest.NewFixture(t, sandboxtest.Options{}))
			if err := sandbox.Arg0Support(b); err == nil {
				t.Error("Arg0Support = nil for the sh agent")
			}
			f := sandboxtest.NewFixture(t, sandboxtest.Options{})
			spec := f.Spec("echo ran")
			spec.Arg0 = "-sh"
			if res, err := b.Run(t.Context(), spec); err == nil {
				t.Errorf("Run with Arg0 on the sh agent ran it: %+v", res)
			}
		})
	}
}

// However often a command's terminal is resized, req/ holds one size
// file for it (the agent lists req/ up to a cap: a runtime resizing a
// window must not fill it).
func TestTTYResizeOneFile(t *testing.T) {
	c, dir := startAgent(t)
	b := writable{&agent.Attached{Conn: c, Root: "/"}}
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec(`stty -echo; echo ready; read line; until [ "$(stty size)" = "50 77" ]; do sleep 0.05; done; echo resized`)
	spec.TTY = &sandbox.TTYSize{Rows: 24, Cols: 80}
	resize := make(chan sandbox.TTYSize) // unbuffered: a send returns once Run has the size
	spec.Resize = resize
	in, feed := io.Pipe()
	spec.Stdin = in
	out := &sandboxtest.Buffer{}
	spec.Stdout = out
	done := make(chan *sandbox.Result, 1)
	go func() {
		res, err := b.Run(context.Background(), spec)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if !sandboxtest.Poll(30*time.Second, func() bool { return strings.Contains(out.String(), "ready") }) {
		t.Fatalf("never ready: %q", out.String())
	}
	for i := 1; i <= 50; i++ {
		resize <- sandbox.TTYSize{Rows: uint16(i), Cols: 77}
	}
	names, err := os.ReadDir(filepath.Join(dir, agent.DirReq))
	if err != nil {
		t.Fatal(err)
	}
	sizes := 0
	for _, n := range names {
		if strings.Contains(n.Name(), ".size.") {
			sizes++
		}
	}
	if sizes > 2 { // the last one, and the one before while it is replaced
		t.Errorf("%d size files in req/ after 50 resizes", sizes)
	}
	feed.Write([]byte("go\n"))
	feed.Close()
	res := <-done
	if res != nil && !strings.HasSuffix(sandboxtest.CRLF(res.Stdout), "resized\n") {
		t.Errorf("stdout %q, want the last size applied", res.Stdout)
	}
}
