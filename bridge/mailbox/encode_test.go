package mailbox

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/internal/vectors"
)

func load(t *testing.T, name string) []vectors.Vector {
	t.Helper()
	_, vs, err := vectors.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestArgvVectors checks EncodeArgv and DecodeArgv against
// testdata/vectors/argv.txtar.
func TestArgvVectors(t *testing.T) {
	for _, v := range load(t, "argv") {
		t.Run(v.Name, func(t *testing.T) {
			lim := Limits{MaxArgs: v.Int("max_args", 4096), MaxArgBytes: int64(v.Int("max_arg_bytes", 1<<20))}
			argv := []byte(v.Str("argv"))
			cwd, gate, args, err := DecodeArgv(argv, lim)
			if v.Has("refused") {
				var le *LimitError
				switch want := v.Str("refused"); {
				case err == nil:
					t.Fatalf("decoded %q %q %q, want it refused (%s)", cwd, gate, args, want)
				case want == "malformed" && errors.As(err, &le):
					t.Fatalf("refused as over a limit (%v), want malformed", err)
				case want != "malformed" && (!errors.As(err, &le) || le.Limit != want):
					t.Fatalf("refused with %v, want over %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if cwd != v.Str("cwd") || gate != v.Str("gate") || !slices.Equal(args, v.Strs("arg")) {
				t.Fatalf("decoded %q %q %q, want %q %q %q", cwd, gate, args, v.Str("cwd"), v.Str("gate"), v.Strs("arg"))
			}
			if got := EncodeArgv(v.Str("cwd"), v.Str("gate"), v.Strs("arg")); !bytes.Equal(got, argv) {
				t.Fatalf("encoded %q, want %q", got, argv)
			}
			if n := int64(len(argv)); n > ArgvMax(lim) {
				t.Fatalf("argv of %d bytes is within the limits but over ArgvMax %d", n, ArgvMax(lim))
			}
		})
	}
}

// TestExitVectors checks EncodeExit and DecodeExit against
// testdata/vectors/exit.txtar.
func TestExitVectors(t *testing.T) {
	for _, v := range load(t, "exit") {
		t.Run(v.Name, func(t *testing.T) {
			exit := []byte(v.Str("exit"))
			files := v.Str("files") == "yes"
			if v.Has("version") {
				a := Answer{Code: v.Int("code", 0), Stdout: []byte(v.Str("stdout")), Stderr: []byte(v.Str("stderr"))}
				got, inline := EncodeExit(v.Int("version", 0), a)
				if !bytes.Equal(got, exit) || inline == files {
					t.Fatalf("encoded %q (inline %v), want %q (files %v)", got, inline, exit, files)
				}
			}
			a, inline, err := DecodeExit(exit)
			if v.Str("malformed") == "yes" {
				if !errors.Is(err, ErrExitMalformed) {
					t.Fatalf("decoded %+v, %v; want it refused", a, err)
				}
				return
			}
			if err != nil || a.Code != v.Int("status", -1) || inline == files {
				t.Fatalf("decoded code %d (inline %v), %v; want %d (files %v)", a.Code, inline, err, v.Int("status", -1), files)
			}
			if !files && (string(a.Stdout) != v.Str("stdout") || string(a.Stderr) != v.Str("stderr")) {
				t.Fatalf("decoded %q %q, want %q %q", a.Stdout, a.Stderr, v.Str("stdout"), v.Str("stderr"))
			}
			if files && (a.Stdout != nil || a.Stderr != nil) {
				t.Fatalf("output decoded from an exit file without it: %q %q", a.Stdout, a.Stderr)
			}
		})
	}
}

// TestAckVectors checks AckName and ParseAck against
// testdata/vectors/ack.txtar.
func TestAckVectors(t *testing.T) {
	for _, v := range load(t, "ack") {
		t.Run(v.Name, func(t *testing.T) {
			id, ok := ParseAck(v.Str("name"))
			switch v.Str("ack") {
			case "yes":
				if !ok || id != v.Str("id") {
					t.Fatalf("ParseAck(%q) = %q, %v; want %q", v.Str("name"), id, ok, v.Str("id"))
				}
				if got := AckName(v.Str("id")); got != v.Str("name") {
					t.Fatalf("AckName(%q) = %q", v.Str("id"), got)
				}
			case "no":
				if ok {
					t.Fatalf("ParseAck(%q) = %q, true; want no acknowledgement", v.Str("name"), id)
				}
			default:
				t.Fatalf("ack %q", v.Str("ack"))
			}
		})
	}
}

// TestExitInlineMax: output up to InlineMax bytes of ASCII is inline, one
// byte more goes to files; both round-trip.
func TestExitInlineMax(t *testing.T) {
	for n, inline := range map[int]bool{InlineMax: true, InlineMax + 1: false} {
		out := []byte(strings.Repeat("x\n", n/2) + strings.Repeat("y", n%2))
		exit, got := EncodeExit(2, Answer{Code: 7, Stdout: out})
		if got != inline {
			t.Fatalf("%d bytes: inline %v", n, got)
		}
		a, dinline, err := DecodeExit(exit)
		if err != nil || a.Code != 7 || dinline != inline || inline && !bytes.Equal(a.Stdout, out) {
			t.Fatalf("%d bytes: decoded %d %v %v", n, a.Code, dinline, err)
		}
	}
}

// FuzzDecodeArgv: DecodeArgv never panics, accepts only what is within
// the limits, and gives back what EncodeArgv makes of it.
func FuzzDecodeArgv(f *testing.F) {
	f.Add([]byte("/w\x00gb_echo\x00a\x00b\x00"), 4, 16)
	f.Add([]byte("\x00\x00"), 0, 0)
	f.Add([]byte("/w\x00g\x00abc"), 8, 8)
	f.Add([]byte("/w\x00g\x00a\x00b\x00c\x00"), 2, 100)
	f.Add(append(bytes.Repeat([]byte("g"), 70), 0, 'x', 0), 1, 1)
	f.Fuzz(func(t *testing.T, b []byte, maxArgs, maxArgBytes int) {
		lim := Limits{MaxArgs: maxArgs % 64, MaxArgBytes: int64(maxArgBytes % 256)}
		cwd, gate, args, err := DecodeArgv(b, lim)
		if err != nil {
			return
		}
		if len(args) > lim.MaxArgs || len(cwd) > MaxCwdLen || len(gate) > MaxNameLen {
			t.Fatalf("over the limits: %d args, cwd %d, gate %d", len(args), len(cwd), len(gate))
		}
		n := 0
		for _, a := range args {
			n += len(a)
			if strings.IndexByte(a, 0) >= 0 {
				t.Fatalf("an argument with a NUL: %q", a)
			}
		}
		if int64(n) > lim.MaxArgBytes {
			t.Fatalf("%d argument bytes, limit %d", n, lim.MaxArgBytes)
		}
		if got := EncodeArgv(cwd, gate, args); !bytes.Equal(got, b) {
			t.Fatalf("EncodeArgv(DecodeArgv(%q)) = %q", b, got)
		}
	})
}
