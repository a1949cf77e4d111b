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
	"regexp/syntax"
	"unicode/utf8"
)

const (
	// binarySniff is how much of a file search checks for a NUL byte.
	binarySniff = 8 << 10
	// maxMatchText caps the text of one printed match line.
	maxMatchText = 500
	// maxProgInst caps the compiled size of a search pattern: matching
	// costs up to (instructions × bytes), so a pattern such as
	// (a|b|…|aa|bb){1000}Q could keep a host core busy for minutes.
	maxProgInst = 10000
	// matchBudget bounds the work (bytes × instructions, the worst case
	// of Go's linear-time matcher) done between two checks of the
	// context: a line costing more is matched through a reader that
	// checks the context every matchBudget/instructions bytes.
	matchBudget = 1 << 22
)

// compilePattern compiles a search pattern, refusing one whose program is
// too large to run in bounded time, and returns its instruction count.
func compilePattern(pat string) (*regexp.Regexp, int, error) {
	tree, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, 0, err
	}
	prog, err := syntax.Compile(tree.Simplify())
	if err != nil {
		return nil, 0, err
	}
	n := len(prog.Inst)
	if n > maxProgInst {
		return nil, 0, fmt.Errorf("pattern too complex: it compiles to %d instructions (at most %d); use fewer alternatives or repetitions", n, maxProgInst)
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, 0, err
	}
	return re, n, nil
}

func newSearch(ws *workspace, o Options) Gate {
	const name = "search"
	return newBuiltin(Spec{
		Name: name,
		Summary: fmt.Sprintf("Print lines matching a Go (RE2) regular expression in workspace files as path:line:text (lines from 1); "+
			"skips .git, symlinks, binary files and files over %s; prints the first %d matches, then a count; exits 1 when nothing matches.",
			humanBytes(o.MaxSearchFileBytes), o.MaxSearchMatches),
		Usage: "search PATTERN [PATH]",
		Params: []Param{
			{Name: "pattern", Description: `RE2 regular expression matched against each line, e.g. 'func \w+\('; prefix (?i) to ignore case.`, Required: true},
			{Name: "path", Description: "File or directory to search (default: the current directory). Output paths are relative to the current directory, printed as list_dir prints names (the file gates take them back as they are); line numbers count from 1, as read_file --offset does."},
		},
	}, argSpec{min: 1, max: 2}, func(ctx context.Context, c *Call, p parsedArgs) (int, error) {
		re, ninst, err := compilePattern(p.pos[0])
		if err != nil {
			return 0, p.spec.usageErr("bad pattern: %v", err)
		}
		path := "."
		if len(p.pos) == 2 {
			path = pathArg(p.pos[1])
		}
		return ws.call(name, c.Cwd, path, func(r *os.Root, rel string) (int, error) {
			return runSearch(ctx, c, r, rel, path, re, ninst, ws, o)
		})
	})
}

// runSearch is one search call in the workspace opened as r.
func runSearch(ctx context.Context, c *Call, r *os.Root, rel, path string, re *regexp.Regexp, ninst int, ws *workspace, o Options) (int, error) {
	const name = "search"
	fi, err := r.Stat(rel)
	if err != nil {
		return 0, pathErr(name, "stat", path, err)
	}
	bw := bufio.NewWriter(stdout(c))
	s := &searchRun{ctx: ctx, root: r, re: re, out: bw, o: o, ws: ws, cwd: c.Cwd,
		every: max(256, matchBudget/max(ninst, 1))}
	switch {
	case fi.Mode().IsRegular():
		skipped, err := s.file(rel)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
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
}

// searchRun is the state of one search call.
type searchRun struct {
	ctx     context.Context
	root    *os.Root
	ws      *workspace
	cwd     string // the caller's, for the paths printed
	re      *regexp.Regexp
	every   int // bytes of a long line matched between context checks
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

// match matches one line. A line whose worst-case cost exceeds
// matchBudget is matched through a reader that checks the context every
// s.every bytes and ends the input once it is done, so a pathological
// pattern over a long line stops soon after the deadline; the result is
// exact (the whole line is one input), and is thrown away when the
// context ended.
func (s *searchRun) match(line []byte) (bool, error) {
	if len(line) <= s.every {
		return s.re.Match(line), nil
	}
	r := &ctxRuneReader{ctx: s.ctx, b: line, every: s.every, left: s.every}
	ok := s.re.MatchReader(r)
	if r.err != nil {
		return false, r.err
	}
	return ok, nil
}

// ctxRuneReader reads b rune by rune as regexp does for a []byte (invalid
// UTF-8 gives utf8.RuneError of width 1), checking ctx every `every`
// bytes; once ctx is done it records the error and reports end of input.
type ctxRuneReader struct {
	ctx   context.Context
	b     []byte
	every int
	left  int
	err   error
}

func (r *ctxRuneReader) ReadRune() (rune, int, error) {
	if r.err != nil || len(r.b) == 0 {
		return 0, 0, io.EOF
	}
	if r.left <= 0 {
		r.left = r.every
		if err := r.ctx.Err(); err != nil {
			r.err = err
			return 0, 0, io.EOF
		}
	}
	c, n := utf8.DecodeRune(r.b)
	r.b = r.b[n:]
	r.left -= n
	return c, n, nil
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
	name := displayName(filepath.ToSlash(s.ws.display(s.cwd, rel)))
	for n := 1; len(data) > 0; n++ {
		if err := s.ctx.Err(); err != nil {
			return "", err
		}
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		ok, err := s.match(line)
		if err != nil {
			return "", err
		}
		if !ok {
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
