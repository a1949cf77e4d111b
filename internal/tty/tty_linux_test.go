package tty

import (
	"bytes"
	"io"
	"os"
	"testing"
)

func TestIsTerminal(t *testing.T) {
	master, slave, err := OpenPTY()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	if !IsTerminal(slave) {
		t.Error("a pty's slave end is not a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	devnull, err := os.Open(os.DevNull) // a character device, not a terminal
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for name, w := range map[string]io.Writer{"pipe": w, "/dev/null": devnull, "buffer": &bytes.Buffer{}, "nil file": (*os.File)(nil)} {
		if IsTerminal(w) {
			t.Errorf("%s is a terminal", name)
		}
	}
}
