package wrappers

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
	"github.com/gatebridge/gatebridge/internal/vectors"
)

// The wrappers are the mailbox's other implementation: these tests run the
// real sh wrapper, under every shell, on each golden vector of
// testdata/vectors (argv.txtar, exit.txtar, ack.txtar), which the Go
// encoders are checked against too (bridge/mailbox/encode_test.go).

// vectorHost answers every call published in dir with what answer
// returns (the exit file, and the .stdout and .stderr files when they are
// not empty), keeping each call's argv file as it was written.
type vectorHost struct {
	dir    string
	answer func(id string) (exit, stdout, stderr []byte)
	mu     sync.Mutex
	argv   map[string][]byte
}

func newVectorHost(t *testing.T, answer func(id string) (exit, stdout, stderr []byte)) *vectorHost {
	t.Helper()
	h := &vectorHost{dir: t.TempDir(), answer: answer, argv: map[string][]byte{}}
	for _, d := range []string{mailbox.DirBin, mailbox.DirCalls, mailbox.DirResponses} {
		if err := os.Mkdir(filepath.Join(h.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			ents, _ := os.ReadDir(filepath.Join(h.dir, mailbox.DirCalls))
			for _, e := range ents {
				h.serve(e.Name())
			}
		}
	}()
	t.Cleanup(func() { close(done); wg.Wait() })
	return h
}

func (h *vectorHost) serve(id string) {
	cd := filepath.Join(h.dir, mailbox.DirCalls, id)
	if fi, err := os.Lstat(filepath.Join(cd, mailbox.FileReady)); err != nil || !fi.Mode().IsRegular() {
		return
	}
	h.mu.Lock()
	_, seen := h.argv[id]
	if !seen {
		h.argv[id], _ = os.ReadFile(filepath.Join(cd, mailbox.FileArgv))
	}
	h.mu.Unlock()
	if seen {
		return
	}
	exit, stdout, stderr := h.answer(id)
	x := filepath.Join(h.dir, mailbox.DirResponses, id)
	writeAtomic(x+mailbox.ExtStdout, stdout)
	writeAtomic(x+mailbox.ExtStderr, stderr)
	writeAtomic(x+mailbox.ExtExit, exit)
	wakeFIFO(cd)
}

// calls returns the argv files of the calls answered.
func (h *vectorHost) calls() map[string][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range h.argv {
		out[k] = v
	}
	return out
}

func loadVectors(t *testing.T, name string) []vectors.Vector {
	t.Helper()
	_, vs, err := vectors.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestArgvVectors: the wrapper called with a vector's gate and arguments
// writes the vector's argv, its own working directory as the cwd.
func TestArgvVectors(t *testing.T) {
	vs := loadVectors(t, "argv")
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, v := range vs {
				if v.Has("refused") {
					continue
				}
				if name == "yash" && slices.ContainsFunc(v.Strs("arg"), func(a string) bool { return !isASCII(a) }) {
					// yash in the C locale cannot hold a byte past 0x7f in a
					// variable at all (as in TestArgsRoundTripByteExact).
					t.Logf("%s: not under yash", v.Name)
					continue
				}
				n++
				h := newVectorHost(t, func(string) ([]byte, []byte, []byte) { return []byte("0\ni\n"), nil, nil })
				script := h.install(t, v.Str("gate"))
				cwd := t.TempDir()
				wrapperDir = cwd
				out, errOut, code := runWrapper(t, sh, script, []string{"PWD=" + cwd}, nil, v.Strs("arg")...)
				wrapperDir = ""
				if code != 0 || out != "" || errOut != "" {
					t.Fatalf("%s: exit %d, stdout %q, stderr %q", v.Name, code, out, errOut)
				}
				calls := h.calls()
				if len(calls) != 1 {
					t.Fatalf("%s: %d calls", v.Name, len(calls))
				}
				want := append([]byte(cwd+"\x00"), v.Str("argv")[len(v.Str("cwd"))+1:]...)
				for _, argv := range calls {
					if !bytes.Equal(argv, want) {
						t.Errorf("%s: argv %q, want %q", v.Name, argv, want)
					}
				}
			}
			if n < 5 {
				t.Fatalf("only %d vectors to run", n)
			}
		})
	}
}

// TestExitVectors: the wrapper answered with a vector's exit file (and
// output files) prints the vector's output and exits with its status; a
// malformed one makes it fail with 1.
func TestExitVectors(t *testing.T) {
	vs := loadVectors(t, "exit")
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			for _, v := range vs {
				files := v.Str("files") == "yes"
				h := newVectorHost(t, func(string) ([]byte, []byte, []byte) {
					if files {
						return []byte(v.Str("exit")), []byte(v.Str("stdout")), []byte(v.Str("stderr"))
					}
					return []byte(v.Str("exit")), nil, nil
				})
				script := h.install(t, "probe")
				out, errOut, code := runWrapper(t, sh, script, nil, nil)
				if code != v.Int("status", -1) {
					t.Errorf("%s: exit %d, want %d (stdout %q, stderr %q)", v.Name, code, v.Int("status", -1), out, errOut)
				}
				if v.Str("malformed") == "yes" {
					if !strings.Contains(errOut, "malformed exit code from the host") {
						t.Errorf("%s: stderr %q", v.Name, errOut)
					}
					continue
				}
				if out != v.Str("stdout") || errOut != v.Str("stderr") {
					t.Errorf("%s: printed %q %q, want %q %q", v.Name, out, errOut, v.Str("stdout"), v.Str("stderr"))
				}
			}
		})
	}
}

// TestAckVectors: a wrapper that claimed the slot of a vector's id
// acknowledges its answer under the vector's name.
func TestAckVectors(t *testing.T) {
	vs := loadVectors(t, "ack")
	for name, sh := range shells(t) {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, v := range vs {
				if v.Str("ack") != "yes" || !strings.HasPrefix(v.Str("id"), mailbox.SlotPrefix) {
					continue
				}
				n++
				h := newVectorHost(t, func(string) ([]byte, []byte, []byte) { return []byte("0\ni\n"), nil, nil })
				makeSlot(t, h.dir, v.Str("id"))
				script := h.install(t, "probe")
				if _, errOut, code := runWrapper(t, sh, script, nil, nil); code != 0 {
					t.Fatalf("%s: exit %d, stderr %q", v.Name, code, errOut)
				}
				if _, ok := h.calls()[v.Str("id")]; !ok {
					t.Fatalf("%s: the slot was not claimed: %v", v.Name, h.calls())
				}
				if _, err := os.Lstat(filepath.Join(h.dir, mailbox.DirCalls, v.Str("name"))); err != nil {
					t.Errorf("%s: no acknowledgement %s: %v", v.Name, v.Str("name"), err)
				}
			}
			if n < 2 {
				t.Fatalf("only %d vectors to run", n)
			}
		})
	}
}

func (h *vectorHost) install(t *testing.T, gate string) string {
	t.Helper()
	if err := WriteDir(filepath.Join(h.dir, mailbox.DirBin), []Spec{{Name: gate}}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(h.dir, mailbox.DirBin, gate)
}
