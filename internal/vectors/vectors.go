// Package vectors reads the golden vectors of the mailbox's encodings
// (testdata/vectors/*.txtar at the repository's root) for the tests that
// check an implementation against them: bridge/mailbox's encoders and
// decoders, and the sh wrappers.
//
// A vector file is a txtar archive: its comment says what the vectors
// mean, and each file in it is one vector, named, holding lines "key
// value". A value is a decimal number or a quoted string of printable
// ASCII in which a backslash starts one of \\, \", \n, \t or \xHH: Go's
// strconv.Unquote and Python's bytes literals (b"...") read it alike, so
// an implementation in another language can read the same files. A key
// may repeat (the arguments of a call); blank lines and lines starting
// with # are skipped.
package vectors

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"
)

// Vector is one named vector.
type Vector struct {
	Name   string
	fields map[string][]string
}

// Has reports whether the vector sets key.
func (v Vector) Has(key string) bool { return len(v.fields[key]) > 0 }

// Str is key's value ("" when unset; the first when repeated).
func (v Vector) Str(key string) string {
	if vs := v.fields[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Strs is every value of key, in order.
func (v Vector) Strs(key string) []string { return v.fields[key] }

// Int is key's value as a number, def when unset. A value that is not a
// number panics (Load checks nothing about keys: the test reading them
// does).
func (v Vector) Int(key string, def int) int {
	if !v.Has(key) {
		return def
	}
	n, err := strconv.Atoi(v.Str(key))
	if err != nil {
		panic(fmt.Sprintf("vector %s: %s %q is not a number", v.Name, key, v.Str(key)))
	}
	return n
}

// Dir is the directory of the vector files.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "vectors")
}

// Load reads Dir()/name.txtar.
func Load(name string) (comment string, vs []Vector, err error) {
	path := filepath.Join(Dir(), name+".txtar")
	a, err := txtar.ParseFile(path)
	if err != nil {
		return "", nil, err
	}
	seen := map[string]bool{}
	for _, f := range a.Files {
		if seen[f.Name] {
			return "", nil, fmt.Errorf("%s: vector %q twice", path, f.Name)
		}
		seen[f.Name] = true
		v := Vector{Name: f.Name, fields: map[string][]string{}}
		for i, line := range strings.Split(string(f.Data), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			key, raw, ok := strings.Cut(line, " ")
			val, err := value(raw)
			if !ok || key == "" || err != nil {
				return "", nil, fmt.Errorf("%s: vector %q line %d: want `key value` (a number or a quoted string): %q (%v)", path, f.Name, i+1, line, err)
			}
			v.fields[key] = append(v.fields[key], val)
		}
		vs = append(vs, v)
	}
	return string(a.Comment), vs, nil
}

// value reads a number or a quoted string in the portable subset.
func value(raw string) (string, error) {
	if !strings.HasPrefix(raw, `"`) {
		if _, err := strconv.Atoi(raw); err != nil {
			return "", err
		}
		return raw, nil
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("byte %#x: escape it", c)
		}
		if c == '\\' {
			if i+1 >= len(raw) || !strings.ContainsRune(`\"ntx`, rune(raw[i+1])) {
				return "", fmt.Errorf("only \\\\ \\\" \\n \\t \\xHH escapes")
			}
			i++
		}
	}
	return strconv.Unquote(raw)
}
