package local_test

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
	"github.com/gatebridge/gatebridge/sandbox/sandboxtest"
)

func TestLocalConformance(t *testing.T) {
	sandboxtest.Run(t, func(*testing.T) sandbox.Backend { return local.New() }, sandboxtest.Options{})
}

func TestLocalCommandNotFound(t *testing.T) {
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("")
	spec.Command = []string{"gatebridge-no-such-command"}
	res, err := local.New().Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != sandbox.ExitNotFound || !bytes.Contains(res.Stderr, []byte("command not found")) {
		t.Errorf("exit %d stderr %q", res.ExitCode, res.Stderr)
	}
}

// The session's bin/ is searched for Command[0] itself, not only by the
// shell.
func TestLocalCommandFromBin(t *testing.T) {
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	spec := f.Spec("")
	spec.Command = []string{"gb-hello", "x"}
	res, err := local.New().Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "hello-from-bin x\n" {
		t.Errorf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// A process that leaves the process group cannot be killed by the local
// backend, but must not make Run wait for it either.
func TestLocalEscapedProcessDoesNotHang(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	f := sandboxtest.NewFixture(t, sandboxtest.Options{})
	m := sandboxtest.Marker()
	t.Cleanup(func() { sandboxtest.KillMarked(m) })
	// The escapee announces itself once it is out of the group, so the
	// group kill after the main shell exits cannot catch it.
	spec := f.Spec(`setsid sh -c 'echo $$ > "$TMPDIR/esc"; exec sleep ` + m + `' &
while [ ! -s "$TMPDIR/esc" ]; do sleep 0.01; done; echo done`)
	start := time.Now()
	res, err := local.New().Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v", d)
	}
	if string(res.Stdout) != "done\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	// This also shows that the leftover check of the suite sees processes.
	if len(sandboxtest.HostProcesses(m)) == 0 {
		t.Error("the escaped sleep is not visible to HostProcesses")
	}
}

func TestLocalTTY(t *testing.T) {
	sandboxtest.RunTTY(t, func(*testing.T) sandbox.Backend { return local.New() }, sandboxtest.Options{})
}
