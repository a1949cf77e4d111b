package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gatebridge/gatebridge/bridge"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// TestMain lets scripts run the gatebridge command in process (the test
// binary re-executed as "gatebridge"), as age's cmd/age tests do.
func TestMain(m *testing.M) {
	os.Exit(testscript.RunMain(m, map[string]func() int{
		"gatebridge": func() int { return run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr) },
	}))
}

// TestScripts runs one scenario per file in testdata/script. Scripts use
// --sandbox local: the integration package covers the other backends.
//
// Extra commands:
//
//	code N PROG [ARG...]  run PROG and require exit code N (like exec)
//	nosessions            fail if a session dir is left in $TMPDIR
//	waitfile FILE         wait until FILE exists (fail after 30s)
//
// Extra conditions:
//
//	[root]  running as root (chown works)
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"code":       cmdCode,
			"nosessions": cmdNoSessions,
			"waitfile":   cmdWaitFile,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			// Sessions go to the script's $TMPDIR, where nosessions looks
			// (the default would be a tmpfs such as /dev/shm).
			env.Setenv("GATEBRIDGE_BRIDGE_SESSION_DIR", env.Getenv("TMPDIR"))
			// The default session parent (which `prune` cleans, with the
			// persistent sandboxes' roots in it) is the script's own too.
			xdg, err := os.MkdirTemp(bridge.DefaultDir(), "gbtest-xdg-")
			if err != nil {
				return err
			}
			env.Defer(func() { hostilefs.RemoveTree(xdg) })
			env.Setenv("XDG_RUNTIME_DIR", xdg)
			return nil
		},
	})
}

func cmdCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: code N PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("code: bad exit code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("code: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

func cmdNoSessions(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: nosessions")
	}
	left, err := filepath.Glob(filepath.Join(ts.Getenv("TMPDIR"), "gb-*"))
	ts.Check(err)
	if len(left) > 0 {
		ts.Fatalf("session dirs left: %v", left)
	}
}

func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: no %s after 30s", args[0])
		}
	}
}
