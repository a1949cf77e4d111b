//go:build unix

package gates

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// result is what the bridge would make of one gate call.
type result struct {
	out, errOut string
	code        int
	err         error
	answer      *string
}

// callGate runs g once with a deadline and fails the test if it hangs.
func callGate(t *testing.T, g Gate, stdin []byte, args ...string) result {
	t.Helper()
	return callGateCtx(t, context.Background(), g, stdin, args...)
}

func callGateCtx(t *testing.T, ctx context.Context, g Gate, stdin []byte, args ...string) result {
	t.Helper()
	return callGateIn(t, ctx, "", g, stdin, args...)
}

// callGateIn calls g from the working directory cwd (as the sandbox sees it).
func callGateIn(t *testing.T, ctx context.Context, cwd string, g Gate, stdin []byte, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	var res result
	c := &Call{
		SessionID: "s", ID: "c", Cwd: cwd,
		Args: args, Stdin: stdin,
		Stdout: &out, Stderr: &errOut,
		Results: resultFunc(func(k, v string) {
			if k == ResultAnswer {
				res.answer = &v
			}
		}),
	}
	type ret struct {
		code int
		err  error
	}
	done := make(chan ret, 1)
	go func() {
		code, err := g.Call(ctx, c)
		done <- ret{code, err}
	}()
	select {
	case r := <-done:
		res.out, res.errOut = out.String(), errOut.String()
		res.code, res.err = ExitCodeOf(r.code, r.err), r.err
		return res
	case <-time.After(10 * time.Second):
		t.Fatalf("%s %q: hung", g.Spec().Name, args)
		return res
	}
}

// errText is the message the wrapper would print, or "".
func (r result) errText() string {
	if r.err == nil {
		return ""
	}
	return r.err.Error()
}

// check compares a result with the expected code, stdout and error text.
func (r result) check(t *testing.T, code int, out, errContains string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d (err: %v, stderr: %q)", r.code, code, r.err, r.errOut)
	}
	if out != "*" && r.out != out {
		t.Errorf("stdout %q, want %q", r.out, out)
	}
	if errContains != "" && !strings.Contains(r.errText(), errContains) {
		t.Errorf("error %q, want it to contain %q", r.errText(), errContains)
	}
	if errContains == "" && r.err != nil {
		t.Errorf("unexpected error %v", r.err)
	}
	if msg := r.errText(); msg != "" && (strings.HasSuffix(msg, ".") || msg != strings.ToLower(msg[:1])+msg[1:]) {
		t.Errorf("error %q: want lower case, no trailing period", msg)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// processGone waits up to 5s for pid to exit (a zombie counts as gone: its
// parent may be a PID 1 that does not reap).
func processGone(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			return true
		}
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

type resultFunc func(k, v string)

func (f resultFunc) SetResult(k, v string) { f(k, v) }
