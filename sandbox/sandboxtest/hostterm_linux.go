//go:build linux

package sandboxtest

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

	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/internal/tty"
	"github.com/gatebridge/gatebridge/sandbox"
)

// The attack of [HostTerminalUntouched]: the command writes to /dev/tty
// and pushes a command line into /dev/tty's input (TIOCSTI), as a hostile
// program would to make gatebridge's user's shell run it.
const hostTermAttack = `echo pwned-by-write > /dev/tty
python3 -c 'import fcntl, os, termios
fd = os.open("/dev/tty", os.O_RDWR)
for c in b"echo pwned-by-tiocsti\n":
    fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))' 2>&1
echo attacked`

const hostTermEnv = "GATEBRIDGE_TEST_HOSTTERM"

// HostTerminalHelper is the body of a test that is not one: when the
// environment says so it is the gatebridge process of
// [HostTerminalUntouched], with a terminal as its controlling terminal; it
// runs the attack on b on a terminal of its own and exits.
func HostTerminalHelper(t *testing.T, b sandbox.Backend) {
	if os.Getenv(hostTermEnv) == "" {
		t.Skip("helper process only")
	}
	f := NewFixture(t, Options{})
	spec := f.Spec(hostTermAttack)
	spec.TTY = &sandbox.TTYSize{Rows: 24, Cols: 80}
	spec.Stdin = strings.NewReader("")
	res, err := b.Run(context.Background(), spec)
	if err != nil {
		os.Stdout.WriteString("RESULT error " + err.Error() + "\n")
		os.Exit(1)
	}
	// What the attack typed would wait in this terminal's input queue.
	queued, _ := unix.IoctlGetInt(0, unix.TIOCINQ)
	os.Stdout.WriteString("RESULT queued=" + strconv.Itoa(queued) + " exit=" + strconv.Itoa(res.ExitCode) + " out=" + strconv.Quote(string(res.Stdout)) + "\n")
	os.Exit(0)
}

// HostTerminalUntouched runs the test helper (a test named helper that
// calls [HostTerminalHelper]) as a process whose controlling terminal is
// a pseudo-terminal this test holds, and fails t if the command the
// helper runs on its own terminal reached the helper's: wrote to it or
// typed into it.
func HostTerminalUntouched(t *testing.T, helper string) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for TIOCSTI")
	}
	master, slave, err := tty.OpenPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	var out Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), hostTermEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var term Buffer // what reached the helper's terminal
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * safety):
		cmd.Process.Kill()
		<-done
	}
	got := out.String()
	t.Logf("helper: %s", got)
	if !strings.Contains(got, `RESULT queued=0 exit=0 out=`) || !strings.Contains(got, "pwned-by-write") {
		t.Errorf("helper printed %q; want exit 0, the write in the command's own output and nothing typed at the helper's terminal", got)
	}
	if bytes.Contains([]byte(term.String()), []byte("pwned")) {
		t.Errorf("the command reached gatebridge's terminal: %q", term.String())
	}
}
