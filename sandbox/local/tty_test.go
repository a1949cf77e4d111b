//go:build linux

package local_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/internal/tty"
	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/gatebridge/gatebridge/sandbox/local"
)

// TestHelperTTY is not a test: it is the gatebridge process, with a
// terminal as its stdin and controlling terminal, for TestLocalTerminalStdin.
func TestHelperTTY(t *testing.T) {
	if os.Getenv("GATEBRIDGE_TEST_HELPER_TTY") == "" {
		t.Skip("helper process only")
	}
	res, err := local.New().Run(context.Background(), &sandbox.Spec{
		Command: []string{"sh", "-c", "read x; echo got $x"},
		Stdin:   os.Stdin,
		Timeout: 5 * time.Second, KillGrace: 100 * time.Millisecond,
	})
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error())
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(res.ExitCode) + " " + string(res.Stdout))
	os.Exit(0)
}

// A command reading gatebridge's terminal must not be stopped by SIGTTIN
// (it runs in its own, background, process group) until the timeout.
func TestLocalTerminalStdin(t *testing.T) {
	master, slave, err := tty.OpenPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTTY$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GATEBRIDGE_TEST_HELPER_TTY=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := master.Read(buf); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	master.WriteString("hi\n")
	cmd.Wait()
	if got := out.String(); !strings.HasPrefix(got, "0 got hi\n") {
		t.Errorf("helper printed %q, want exit 0 and %q", got, "got hi")
	}
}
