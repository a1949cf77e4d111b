package control

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatebridge/gatebridge/internal/hint"
)

// CopyFileIn copies the local regular file src (stdin for "-") to dst in
// the workspace, into the directory dst names keeping src's name (as
// CopyIn does); it returns where it went and how many bytes.
func (f *FS) CopyFileIn(src, dst string, stdin io.Reader) (to string, n int64, err error) {
	r, base := stdin, ""
	if src != "-" {
		file, err := os.Open(src)
		if err != nil {
			return "", 0, err
		}
		defer file.Close()
		if st, err := file.Stat(); err != nil {
			return "", 0, err
		} else if !st.Mode().IsRegular() {
			return "", 0, hint.With(fmt.Errorf("sandbox cp: %s is not a regular file", src), "copy files one at a time (a directory: tar it first)")
		}
		r, base = file, filepath.Base(src)
	}
	return f.CopyIn(dst, base, r)
}

// CopyFileOut copies src in the workspace to the local path dst (stdout
// for "-"; into the directory dst names, or a path ending in /, keeping
// src's name), written to a temporary file and renamed; it returns where
// it went ("" for stdout) and how many bytes.
func (f *FS) CopyFileOut(src, dst string, stdout io.Writer) (to string, n int64, err error) {
	if dst == "-" {
		n, err := f.ReadTo(src, stdout)
		return "", n, err
	}
	if st, err := os.Stat(dst); err == nil && st.IsDir() || strings.HasSuffix(dst, "/") {
		dst = filepath.Join(dst, filepath.Base(src))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".gatebridge-cp-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name())
	n, err = f.ReadTo(src, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", 0, err
	}
	return dst, n, nil
}
