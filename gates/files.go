package gates

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

func newReadFile(ws *workspace, o Options) Gate {
	const name = "read_file"
	max := o.MaxFileBytes
	return newBuiltin(Spec{
		Name: name,
		Summary: fmt.Sprintf("Print a file from the workspace, whole or a range of lines. "+
			"Files over %s must be read in ranges.", humanBytes(max)),
		Usage: "read_file [--offset N] [--limit N] PATH",
		Params: []Param{
			{Name: "offset", Description: "Start at line N, counted from 1 as search prints line numbers (0 is line 1 too).", Flag: true, Type: "integer"},
			{Name: "limit", Description: "Print at most N lines.", Flag: true, Type: "integer"},
			{Name: "path", Description: "File; relative paths start at the current directory. A name as list_dir or search prints it, quoted or not, is taken as it is.", Required: true},
		},
	}, argSpec{options: []string{"offset", "limit"}, min: 1, max: 1},
		func(ctx context.Context, c *Call, p parsedArgs) (int, error) {
			g := &readFile{ws: ws, max: max}
			return g.run(ctx, c, p)
		})
}

type readFile struct {
	ws  *workspace
	max int64
}

func (g *readFile) run(ctx context.Context, c *Call, p parsedArgs) (int, error) {
	const name = "read_file"
	// --offset N starts at line N, counted from 1 as search prints them,
	// so a line number copied from search shows that line first; 0 is
	// line 1 too (it was the first line when --offset counted from 0).
	offset, err := p.count("offset", 0)
	if err != nil {
		return 0, err
	}
	offset = max(offset-1, 0)
	limit, err := p.count("limit", -1)
	if err != nil {
		return 0, err
	}
	path := pathArg(p.pos[0])
	return g.ws.call(name, c.Cwd, path, func(r *os.Root, rel string) (int, error) {
		return g.read(ctx, c, r, rel, path, p, offset, limit)
	})
}

// read prints the file rel of the workspace opened as r.
func (g *readFile) read(ctx context.Context, c *Call, r *os.Root, rel, path string, p parsedArgs, offset, limit int64) (int, error) {
	const name = "read_file"
	f, fi, err := openRegular(name, r, rel, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	out := stdout(c)

	_, ranged := p.opts["offset"]
	if _, ok := p.opts["limit"]; ok {
		ranged = true
	}
	if !ranged {
		if fi.Size() > g.max {
			return 0, Deniedf("%s: %s is %d bytes, over the %d-byte limit; read it in parts with --offset and --limit",
				name, quoteArg(path), fi.Size(), g.max)
		}
		more, err := limitedCopy(out, f, g.max)
		if err != nil {
			return 0, pathErr(name, "read", path, err)
		}
		if more {
			return 0, Deniedf("%s: %s grew past the %d-byte limit while being read", name, quoteArg(path), g.max)
		}
		return ExitOK, nil
	}
	return g.lines(ctx, out, f, path, offset, limit)
}

// lines prints lines [offset, offset+limit) of f, counted from 0 (limit <
// 0: to the end), reading in bounded chunks so a huge line or file never
// sits in memory.
func (g *readFile) lines(ctx context.Context, out io.Writer, f io.Reader, path string, offset, limit int64) (int, error) {
	const name = "read_file"
	br := bufio.NewReaderSize(f, 64<<10)
	var line, printed, written int64
	for i := 0; limit < 0 || printed < limit; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && line >= offset {
			if written+int64(len(chunk)) > g.max {
				out.Write(chunk[:g.max-written])
				return 0, Deniedf("%s: stopped after %d bytes (the limit); use a smaller --limit", name, g.max)
			}
			if _, werr := out.Write(chunk); werr != nil {
				return 0, fmt.Errorf("%s: write: %w", name, werr)
			}
			written += int64(len(chunk))
		}
		switch {
		case err == nil: // a whole line
			if line >= offset {
				printed++
			}
			line++
		case errors.Is(err, bufio.ErrBufferFull): // the same line continues
		case errors.Is(err, io.EOF):
			return ExitOK, nil
		default:
			return 0, pathErr(name, "read", path, err)
		}
	}
	return ExitOK, nil
}

func newListDir(ws *workspace, o Options) Gate {
	const name = "list_dir"
	maxEntries := o.MaxDirEntries
	return newBuiltin(Spec{
		Name: name,
		Summary: "List a workspace directory: one entry per line, sorted; directories end in /, symlinks are listed but not followed. " +
			`A name holding a newline or other control character, or starting with ", is printed Go-quoted ("a\nb"); the file gates take every line back as a path, as it is.`,
		Usage: "list_dir [PATH]",
		Params: []Param{
			{Name: "path", Description: "Directory (default: the current directory)."},
		},
	}, argSpec{min: 0, max: 1}, func(ctx context.Context, c *Call, p parsedArgs) (int, error) {
		path := "."
		if len(p.pos) == 1 {
			path = pathArg(p.pos[0])
		}
		var ents []fs.DirEntry
		var more bool
		_, err := ws.call(name, c.Cwd, path, func(r *os.Root, rel string) (int, error) {
			d, err := openDir(name, r, rel, path)
			if err != nil {
				return 0, err
			}
			defer d.Close()
			ents, more, err = readDirBounded(ctx, d, maxEntries)
			if err != nil {
				return 0, pathErr(name, "read directory", path, err)
			}
			return 0, nil
		})
		if err != nil {
			return 0, err
		}
		var sb strings.Builder
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() {
				n += "/" // inside the quotes of a quoted name
			}
			sb.WriteString(displayName(n))
			sb.WriteByte('\n')
		}
		if more {
			fmt.Fprintf(&sb, "... listing stopped at %d entries\n", maxEntries)
		}
		if _, err := io.WriteString(stdout(c), sb.String()); err != nil {
			return 0, fmt.Errorf("%s: write: %w", name, err)
		}
		return ExitOK, nil
	})
}

// readDirBounded reads at most max entries of d, sorted by name, and
// reports whether there were more.
func readDirBounded(ctx context.Context, d *os.File, max int) ([]fs.DirEntry, bool, error) {
	var ents []fs.DirEntry
	for len(ents) <= max {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		batch, err := d.ReadDir(min(1024, max+1-len(ents)))
		ents = append(ents, batch...)
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	more := len(ents) > max
	if more {
		ents = ents[:max]
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, more, nil
}

func newWriteFile(ws *workspace, o Options) Gate {
	const name = "write_file"
	max := o.MaxFileBytes
	return newBuiltin(Spec{
		Name: name,
		Summary: fmt.Sprintf("Write stdin to a file in the writable workspace, replacing it atomically and creating parent directories; "+
			"at most %s, never through a symlink. Prints nothing.", humanBytes(max)),
		Usage: "write_file PATH < CONTENT",
		Params: []Param{
			{Name: "path", Description: "File in the writable workspace; relative paths start at the current directory.", Required: true},
		},
		Stdin: StdinAlways,
	}, argSpec{min: 1, max: 1}, func(ctx context.Context, c *Call, p parsedArgs) (int, error) {
		path := pathArg(p.pos[0])
		rel, err := ws.rel(name, c.Cwd, path)
		if err != nil {
			return 0, err
		}
		// Refused at once, before any directory is made; the walk in
		// writeWorkspaceFile checks every component again as it opens it.
		if err := checkProtected(name, path, rel, o.ProtectedPaths); err != nil {
			return 0, err
		}
		if int64(len(c.Stdin)) > max {
			return 0, Deniedf("%s: content is %d bytes, over the %d-byte limit", name, len(c.Stdin), max)
		}
		if err := writeWorkspaceFile(ws, rel, path, c.Stdin, o.ProtectedPaths); err != nil {
			return 0, err
		}
		return ExitOK, nil
	})
}

// checkProtected refuses rel when it is or lies under a protected path.
func checkProtected(gate, path, rel string, protected []string) error {
	if p, ok := ProtectedPath(rel, protected); ok {
		return Deniedf("%s: %s is under the protected path %s (set by sandbox.protected_paths): host tools run what is there", gate, quoteArg(path), p)
	}
	return nil
}

// testHookAfterCheck, set by tests only, runs after each protected-path
// check of writeWorkspaceFile passes, with the path checked: where a sandbox
// racing the gate would swap a directory for a symlink.
var testHookAfterCheck func(rel string)

// writeWorkspaceFile writes data to rel (clean, relative to the writable
// workspace; path is how the caller named it) through a temporary file in
// the same directory and a rename, making missing parent directories.
//
// The sandbox can rename entries in the workspace while this runs, so
// nothing is checked on the path string and then used by name: the
// parent directory is reached by [hostilefs.Dir.Walk], one component at a
// time from the workspace's fd with O_NOFOLLOW, each component checked
// against the protected paths just before it is opened, and the file is
// created and renamed relative to the directory fd the walk opened. A
// symlink on the way (or as the file) is refused; a directory renamed
// after the walk opened it is still the one written into, wherever it
// now is, never what took its name.
//
// As root, what this makes belongs to the owner of the workspace root (the
// identity a sandboxed command runs as, see sandbox.Spec.UID) instead of
// root. On Linux the walk and the write act as that owner ([workspace.do]):
// a directory or file the owner could not write is refused, and a file
// replaced keeps its mode but becomes the owner's, as when the sandbox
// replaces it. Elsewhere a file replaced keeps its owner, group and mode.
func writeWorkspaceFile(ws *workspace, rel, path string, data []byte, protected []string) error {
	const name = "write_file"
	if rel == "." {
		return fmt.Errorf("%s: %s is a directory", name, quoteArg(path))
	}
	root, err := hostilefs.OpenDir(ws.dir)
	if err != nil {
		return fmt.Errorf("%s: open workspace: %w", name, err)
	}
	defer root.Close()
	st, err := root.Stat()
	if err != nil {
		return fmt.Errorf("%s: stat workspace: %w", name, err)
	}
	if !ws.sameAs(st.Dev, st.Ino) {
		return ws.replaced(name)
	}
	// Acting as the workspace's owner (ws.as), what this makes is
	// theirs; else, as root, it is given to the root's owner.
	var owner *hostilefs.Owner
	if os.Geteuid() == 0 && ws.as == nil {
		owner = &hostilefs.Owner{UID: st.UID, GID: st.GID}
	}
	_, err = ws.do(func() (int, error) { return 0, writeBeneath(root, rel, path, data, protected, owner) })
	return err
}

// writeBeneath is writeWorkspaceFile's walk and write from the workspace
// root opened as root.
func writeBeneath(root *hostilefs.Dir, rel, path string, data []byte, protected []string, owner *hostilefs.Owner) error {
	const name = "write_file"
	check := func(sub string) error {
		if err := checkProtected(name, path, sub, protected); err != nil {
			return err
		}
		if testHookAfterCheck != nil {
			testHookAfterCheck(sub)
		}
		return nil
	}
	d, err := root.Walk(filepath.Dir(rel), hostilefs.WalkOptions{Check: check, Create: true, Perm: 0o755, Owner: owner})
	if err != nil {
		return walkErr(name, path, err)
	}
	defer d.Close()
	base := filepath.Base(rel)
	if err := check(rel); err != nil {
		return err
	}
	var nr *hostilefs.NotRegularError
	_, err = d.ReplaceFrom(base, bytes.NewReader(data), -1, hostilefs.WriteOptions{Perm: 0o644, Owner: owner, Sync: true})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hostilefs.ErrSymlink):
		return Deniedf("%s: %s is a symlink; write_file does not write through symlinks", name, quoteArg(rel))
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s: %s is a directory", name, quoteArg(path))
	case errors.As(err, &nr):
		return Deniedf("%s: %s is %s; only regular files are written", name, quoteArg(path), kind(nr.Mode))
	}
	return pathErr(name, "write", path, err)
}

// walkErr turns an error of the walk to rel's parent into the gate's.
func walkErr(gate, path string, err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err // a protected path, refused by the check
	}
	switch {
	case errors.Is(err, hostilefs.ErrSymlink):
		return Deniedf("%s: %s is a symlink; write_file does not write through symlinks", gate, quoteArg(pe.Path))
	case errors.Is(err, hostilefs.ErrChanged):
		return Deniedf("%s: %s changed while write_file opened it (a symlink swapped in and out?); nothing written", gate, quoteArg(pe.Path))
	case errors.Is(err, hostilefs.ErrNotDir):
		return fmt.Errorf("%s: %s is not a directory", gate, quoteArg(pe.Path))
	}
	return pathErr(gate, "create directory", path, err)
}
