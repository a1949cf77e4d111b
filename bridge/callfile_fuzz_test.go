package bridge

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

const fuzzSecret = "FUZZ-SECRET-7d3a"

// Hostile shapes FuzzReadCall can give a call dir, as bits of flags.
const (
	fzGateSymlink  = 1 << iota // gate → a host file holding the secret
	fzArgSymlink               // args/0 → the secret
	fzStdinSymlink             // stdin → the secret
	fzStdinFIFO                // stdin is a FIFO
	fzArgHardLink              // args/0 hard-linked to a file outside the call
	fzArgsIsFile               // args is a regular file
	fzGateIsDir                // gate is a directory
	fzArgsSymlink              // args/ → a host dir holding the secret as 0
	fzOddName                  // an extra entry named odd in args/
	fzV2                       // v2 layout: argv instead of gate and args/ (args symlink/hard-link flags apply to argv)
	fzHostile      = fzGateSymlink | fzArgSymlink | fzStdinSymlink | fzStdinFIFO | fzArgHardLink | fzArgsIsFile | fzGateIsDir | fzArgsSymlink
)

// FuzzReadCall builds a call directory from the input (gate bytes, args
// split at NUL into args/0..N-1, stdin, hostile shapes and an odd entry
// name) and reads it with the limits the host uses. Read must never
// panic or hang, never return the secret outside the call dir, and accept
// only a well-formed call within the limits.
func FuzzReadCall(f *testing.F) {
	f.Add([]byte("gb_echo"), []byte("a\x00b"), []byte(""), uint16(0), "")
	f.Add([]byte("gb_echo"), []byte("x"), []byte("in"), uint16(fzGateSymlink), "")
	f.Add([]byte("gb_echo"), []byte("x"), []byte(""), uint16(fzArgSymlink), "")
	f.Add([]byte("gb_echo"), []byte(""), []byte(""), uint16(fzStdinSymlink|fzStdinFIFO), "")
	f.Add([]byte("gb_echo"), []byte("x"), []byte(""), uint16(fzArgHardLink), "")
	f.Add([]byte("gb_echo"), []byte(""), []byte(""), uint16(fzArgsIsFile|fzGateIsDir), "")
	f.Add([]byte("gb_echo"), []byte(""), []byte(""), uint16(fzArgsSymlink), "")
	f.Add([]byte("../../bin/sh"), []byte("a"), []byte(""), uint16(fzOddName), "01")
	f.Add([]byte("gb_echo"), []byte("a\x00b\x00c"), []byte(""), uint16(fzOddName), "-1")
	f.Add([]byte("gb_echo"), []byte("a"), []byte(""), uint16(fzOddName), ".tmp")
	f.Add(bytes.Repeat([]byte("g"), 65), []byte(""), bytes.Repeat([]byte("s"), 300), uint16(0), "")
	f.Add([]byte("gate\nname"), bytes.Repeat([]byte("a\x00"), 20), []byte(""), uint16(0), "")
	f.Add([]byte("gb_echo"), []byte("a\x00b"), []byte("in"), uint16(fzV2), "")
	f.Add([]byte("gb_echo"), []byte("x"), []byte(""), uint16(fzV2|fzArgSymlink), "")
	f.Add([]byte("gb_echo"), []byte("x"), []byte(""), uint16(fzV2|fzArgHardLink), "")
	f.Add(bytes.Repeat([]byte("g"), 65), []byte(""), []byte(""), uint16(fzV2), "")
	f.Add([]byte("gb_echo"), bytes.Repeat([]byte("a\x00"), 20), []byte(""), uint16(fzV2), "")
	f.Fuzz(func(t *testing.T, gate, args, stdin []byte, flags uint16, odd string) {
		host := t.TempDir()
		secret := filepath.Join(host, "secret")
		mustF(t, os.WriteFile(secret, []byte(fuzzSecret), 0o644))
		secretDir := filepath.Join(host, "sdir")
		mustF(t, os.Mkdir(secretDir, 0o755))
		mustF(t, os.WriteFile(filepath.Join(secretDir, "0"), []byte(fuzzSecret), 0o644))
		secretArgv := filepath.Join(host, "secret-argv")
		mustF(t, os.WriteFile(secretArgv, []byte(fuzzSecret+"\x00"), 0o644))
		dir := filepath.Join(host, "call")
		mustF(t, os.Mkdir(dir, 0o755))

		v2 := flags&fzV2 != 0
		if v2 && bytes.IndexByte(gate, 0) >= 0 {
			return // a NUL in the gate name is a word boundary in argv: another call
		}
		switch {
		case v2:
		case flags&fzGateIsDir != 0:
			mustF(t, os.Mkdir(filepath.Join(dir, "gate"), 0o755))
		case flags&fzGateSymlink != 0:
			mustF(t, os.Symlink(secret, filepath.Join(dir, "gate")))
		default:
			mustF(t, os.WriteFile(filepath.Join(dir, "gate"), gate, 0o644))
		}
		var want []string
		oddWritten := false
		if len(args) > 0 {
			want = splitNUL(args)
			if len(want) > 12 {
				want = want[:12] // past MaxArgs (8) already; keep runs fast
			}
		}
		switch {
		case v2:
			p := filepath.Join(dir, mailbox.FileArgv)
			switch {
			case flags&fzArgSymlink != 0:
				mustF(t, os.Symlink(secretArgv, p))
			case flags&fzArgHardLink != 0:
				mustF(t, os.Link(secretArgv, p))
			default:
				var b []byte
				for _, w := range append([]string{"/workspace/sub", string(gate)}, want...) {
					b = append(append(b, w...), 0)
				}
				mustF(t, os.WriteFile(p, b, 0o644))
			}
		case flags&fzArgsIsFile != 0:
			mustF(t, os.WriteFile(filepath.Join(dir, "args"), args, 0o644))
		case flags&fzArgsSymlink != 0:
			mustF(t, os.Symlink(secretDir, filepath.Join(dir, "args")))
		default:
			mustF(t, os.Mkdir(filepath.Join(dir, "args"), 0o755))
			for i, a := range want {
				p := filepath.Join(dir, "args", strconv.Itoa(i))
				if i == 0 && flags&fzArgSymlink != 0 {
					mustF(t, os.Symlink(secret, p))
					continue
				}
				if i == 0 && flags&fzArgHardLink != 0 {
					mustF(t, os.Link(secret, p))
					continue
				}
				mustF(t, os.WriteFile(p, []byte(a), 0o644))
			}
			if flags&fzOddName != 0 && odd != "" && len(odd) < 200 && !bytes.ContainsAny([]byte(odd), "/\x00") && odd != "." && odd != ".." && !isArgIndex(odd, len(want)) {
				if os.WriteFile(filepath.Join(dir, "args", odd), []byte("odd"), 0o644) == nil {
					if isArgIndex(odd, len(want)+1) {
						want = append(want, "odd") // completes 0..N: a valid call
					} else {
						oddWritten = true
					}
				}
			}
		}
		switch {
		case flags&fzStdinFIFO != 0:
			mustF(t, syscall.Mkfifo(filepath.Join(dir, "stdin"), 0o644))
		case flags&fzStdinSymlink != 0:
			mustF(t, os.Symlink(secret, filepath.Join(dir, "stdin")))
		case len(stdin) > 0:
			mustF(t, os.WriteFile(filepath.Join(dir, "stdin"), stdin, 0o644))
		}

		lim := mailbox.Limits{MaxArgs: 8, MaxArgBytes: 256, MaxStdinBytes: 128}
		box, err := openBox(mailbox.Layout{Calls: host, Responses: host})
		mustF(t, err)
		defer box.close()
		c, err := box.openCall("call")
		mustF(t, err)
		defer c.close()

		type result struct {
			req *callData
			err error
		}
		done := make(chan result, 1)
		go func() {
			req, err := c.read(lim)
			done <- result{req, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Read hung (flags %#x)", flags)
		}
		if r.err != nil {
			if bytes.Contains([]byte(r.err.Error()), []byte(fuzzSecret)) {
				t.Fatalf("error leaks the secret: %v", r.err)
			}
			return
		}
		req := r.req
		hostile := flags&(fzHostile&^(fzArgSymlink|fzArgHardLink)) != 0 ||
			flags&(fzArgSymlink|fzArgHardLink) != 0 && (len(want) > 0 || v2)
		if v2 {
			hostile = flags&(fzArgSymlink|fzArgHardLink|fzStdinFIFO|fzStdinSymlink) != 0
		}
		if hostile {
			t.Fatalf("hostile call accepted (flags %#x): %+v", flags, req)
		}
		if req.gate != string(gate) {
			t.Fatalf("gate %q, want %q", req.gate, gate)
		}
		if wantCwd := map[bool]string{true: "/workspace/sub"}[v2]; req.cwd != wantCwd {
			t.Fatalf("cwd %q, want %q", req.cwd, wantCwd)
		}
		if len(req.gate) > 64 {
			t.Fatalf("gate name of %d bytes accepted", len(req.gate))
		}
		if len(req.args) > lim.MaxArgs {
			t.Fatalf("%d args accepted, limit %d", len(req.args), lim.MaxArgs)
		}
		var total int64 = int64(len(req.gate))
		for i, a := range req.args {
			if bytes.IndexByte([]byte(a), 0) >= 0 {
				t.Fatalf("arg %d has a NUL", i)
			}
			if a == fuzzSecret {
				t.Fatalf("arg %d is the host secret", i)
			}
			total += int64(len(a))
		}
		if total > lim.MaxArgBytes {
			t.Fatalf("%d argument bytes accepted, limit %d", total, lim.MaxArgBytes)
		}
		if int64(len(req.stdin)) > lim.MaxStdinBytes || string(req.stdin) == fuzzSecret {
			t.Fatalf("stdin of %d bytes accepted", len(req.stdin))
		}
		if !equalStrings(req.args, want) && !(len(req.args) == 0 && len(want) == 0) {
			t.Fatalf("args %q, want %q", req.args, want)
		}
		if oddWritten && !v2 {
			t.Fatalf("odd entry %q in args/ accepted", odd)
		}
		if !bytes.Equal(req.stdin, stdin) && flags&(fzStdinFIFO|fzStdinSymlink) == 0 {
			t.Fatalf("stdin %q, want %q", req.stdin, stdin)
		}
	})
}

func isArgIndex(name string, n int) bool {
	i, err := strconv.Atoi(name)
	return err == nil && i >= 0 && i < n && strconv.Itoa(i) == name
}

func splitNUL(b []byte) []string {
	var out []string
	for _, p := range bytes.Split(b, []byte{0}) {
		out = append(out, string(p))
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustF(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
