package gates

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

const (
	// binarySniff is how much of a file search checks for a NUL byte.
	binarySniff = 8 << 10
	// maxMatchText caps the text of one printed match line.
	maxMatchText = 500
)

func newSearch(ws *workspace, o Options) Gate {
	const name = "search"
	return newBuiltin(Spec{
		Name: name,
		Summary: fmt.Sprintf("Print lines matching a Go (RE2) regular expression in workspace files as path:line:text (lines from 1); "+
			"skips .git, symlinks, binary files and files over %s; prints the first %d matches, then a count; exits 1 when nothing matches.",
			humanBytes(o.MaxSearchFileBytes), o.MaxSearchMatches),
		Usage: "search PATTERN [PATH]",
		Params: []Param{
			{Name: "PATTERN", Description: `RE2 regular expression matched against each line, e.g. 'func \w+\('; prefix (?i) to ignore case.`, Required: true},
			{Name: "PATH", Description: "File or directory to search, relative to the workspace root (default: the root). Output paths are relative to the root."},
		},
	}, argSpec{min: 1, max: 2}, func(ctx context.Context, c *Call, p parsedArgs) (int, error) {
		re, err := regexp.Compile(p.pos[0])
		if err != nil {
			return 0, p.spec.usageErr("bad pattern: %v", err)
		}
		path := "."
		if len(p.pos) == 2 {
			path = p.pos[1]
		}
		r, rel, err := ws.open(name, path)
		if err != nil {
			return 0, err
		}
		defer r.Close()
		fi, err := r.Stat(rel)
		if err != nil {
			return 0, pathErr(name, "stat", path, err)
		}
		bw := bufio.NewWriter(stdout(c))
		s := &searchRun{ctx: ctx, root: r, re: re, out: bw, o: o}
		switch {
		case fi.Mode().IsRegular():
			skipped, err := s.file(rel)
			if err != nil {
				return 0, pathErr(name, "read", path, err)
			}
			if skipped != "" {
				fmt.Fprintf(stderr(c), "search: skipped %s: %s\n", quoteArg(path), skipped)
			}
		case fi.IsDir():
			if err := s.dir(rel); err != nil {
				if ctx.Err() != nil {
					return 0, ctx.Err()
				}
				return 0, pathErr(name, "read", path, err)
			}
		default:
			return 0, Deniedf("%s: %s is %s; only regular files and directories are searched", name, quoteArg(path), kind(fi.Mode()))
		}
		if s.matches > o.MaxSearchMatches {
			fmt.Fprintf(bw, "... %d more matches\n", s.matches-o.MaxSearchMatches)
		}
		if err := bw.Flush(); err != nil {
			return 0, fmt.Errorf("%s: write: %w", name, err)
		}
		if s.stopped {
			fmt.Fprintf(stderr(c), "search: stopped after reading %d files; narrow PATH\n", o.MaxSearchFiles)
		}
		if s.matches == 0 {
			return ExitFailure, nil
		}
		return ExitOK, nil
	})
}

// searchRun is the state of one search call.
type searchRun struct {
	ctx     context.Context
	root    *os.Root
	re      *regexp.Regexp
	out     *bufio.Writer
	o       Options
	files   int
	matches int
	stopped bool // MaxSearchFiles reached
}

// dir searches the directory rel depth first in name order. Symlinks,
// special files and .git directories are skipped; unreadable
// subdirectories and files are skipped too.
func (s *searchRun) dir(rel string) error {
	d, err := s.root.OpenFile(rel, os.O_RDONLY|oNonblock|oDirectory, 0)
	if err != nil {
		return err
	}
	ents, _, err := readDirBounded(s.ctx, d, s.o.MaxDirEntries)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		if s.stopped {
			return nil
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		child := filepath.Join(rel, e.Name())
		switch t := e.Type(); {
		case t.IsDir():
			if e.Name() == ".git" {
				continue
			}
			if err := s.dir(child); err != nil && s.ctx.Err() != nil {
				return err
			}
		case t.IsRegular():
			s.file(child)
		}
	}
	return nil
}

// file searches one regular file and returns why it was skipped, if it was.
func (s *searchRun) file(rel string) (skipped string, err error) {
	if s.files >= s.o.MaxSearchFiles {
		s.stopped = true
		return "too many files", nil
	}
	s.files++
	f, err := s.root.OpenFile(rel, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "not a regular file", nil
	}
	max := s.o.MaxSearchFileBytes
	if fi.Size() > max {
		return fmt.Sprintf("larger than %d bytes", max), nil
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", err
	}
	if int64(len(data)) > max {
		return fmt.Sprintf("larger than %d bytes", max), nil
	}
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return "binary file", nil
	}
	name := displayName(filepath.ToSlash(rel))
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if !s.re.Match(line) {
			continue
		}
		s.matches++
		if s.matches > s.o.MaxSearchMatches {
			continue
		}
		cut := ""
		if len(line) > maxMatchText {
			line, cut = line[:maxMatchText], "…"
		}
		fmt.Fprintf(s.out, "%s:%d:%s%s\n", name, n, line, cut)
	}
	return "", nil
}
