package approval

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/gatebridge/gatebridge/internal/hint"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// FileName is the grants file's name in its default directory,
// $XDG_CONFIG_HOME/gatebridge (~/.config/gatebridge).
const FileName = "grants.yaml"

// maxFileBytes bounds the grants file.
const maxFileBytes = 1 << 20

// DefaultPath is $XDG_CONFIG_HOME/gatebridge/grants.yaml, or
// ~/.config/gatebridge/grants.yaml.
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("approval: no grants file: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "gatebridge", FileName), nil
}

// file is the grants file's YAML document.
type file struct {
	Grants []Grant `yaml:"grants"`
}

// Store is the grants file: the grants of lifetime workspace and always.
// It is only ever read from its path (never from a workspace or the
// current directory), and only if it is a regular file, not a link,
// owned by this user, 0600 in a directory only this user can write
// (0700); it is written atomically (a temporary file renamed over it).
// [Store.List] rereads it whenever it changed, so a grant removed by
// `gatebridge grants rm` or by hand stops matching at the next call, in
// every running process.
type Store struct {
	path string

	mu    sync.Mutex
	stamp stamp
	list  []Grant
	err   error
}

// stamp tells whether the file changed since it was read.
type stamp struct {
	dev, ino   uint64
	size       int64
	mtime      int64 // ns
	missing    bool
	haveStamps bool
}

// NewStore returns the store at path (an absolute path). The file need
// not exist: a missing file holds no grants.
func NewStore(path string) (*Store, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("approval: grants file %s is not an absolute path", path)
	}
	return &Store{path: filepath.Clean(path)}, nil
}

// Path is the file's path.
func (s *Store) Path() string { return s.path }

// Inside reports an error when the grants file lies in dir (a workspace
// the sandbox can write would let it plant grants).
func (s *Store) Inside(dir string) error {
	if dir == "" {
		return nil
	}
	// As written, and with links resolved on both sides: a grants file
	// reached through a link into the workspace is in it.
	if within(s.path, dir) || within(resolve(s.path), resolve(dir)) {
		return hint.With(fmt.Errorf("approval: the grants file %s is inside the workspace %s, where the sandbox could write it", s.path, dir),
			"set approvals.grants_file to a path outside every workspace (the default is $XDG_CONFIG_HOME/gatebridge/grants.yaml)")
	}
	return nil
}

// within reports whether path is dir or lies under it (both clean and
// absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolve is p with the links of its longest existing prefix resolved
// (the file, and its directory, need not exist yet).
func resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// List returns the grants in the file now (rereading it if it changed),
// without those that expired.
func (s *Store) List(now time.Time) ([]Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := statFile(s.path)
	if err != nil {
		return nil, err
	}
	if !s.stamp.haveStamps || st != s.stamp {
		s.list, s.err = readFile(s.path)
		s.stamp = st
	}
	if s.err != nil {
		return nil, s.err
	}
	out := make([]Grant, 0, len(s.list))
	for _, g := range s.list {
		if g.Expires.IsZero() || now.Before(g.Expires) {
			out = append(out, g)
		}
	}
	return out, nil
}

// Add stores g (a workspace or always grant), giving it an id and a
// creation time when it has none, and returns it as stored.
func (s *Store) Add(g Grant, now time.Time) (Grant, error) {
	if g.Lifetime != LifeWorkspace && g.Lifetime != LifeAlways {
		return Grant{}, fmt.Errorf("approval: a %s grant is not stored (only workspace and always grants are)", g.Lifetime)
	}
	if err := g.Validate(); err != nil {
		return Grant{}, err
	}
	if g.ID == "" {
		g.ID = newID()
	}
	if g.Created.IsZero() {
		g.Created = now.UTC().Truncate(time.Second)
	}
	err := s.edit(func(list []Grant) ([]Grant, error) {
		for _, o := range list {
			if o.ID == g.ID {
				return nil, fmt.Errorf("approval: a grant with id %s exists", g.ID)
			}
		}
		return append(list, g), nil
	})
	return g, err
}

// ErrNoGrant is a Remove of an id the file does not hold.
var ErrNoGrant = errors.New("approval: no such grant")

// Remove deletes the grant with id.
func (s *Store) Remove(id string) error {
	return s.edit(func(list []Grant) ([]Grant, error) {
		for i, o := range list {
			if o.ID == id {
				return append(list[:i:i], list[i+1:]...), nil
			}
		}
		return nil, hint.With(fmt.Errorf("%w: %s", ErrNoGrant, id), "gatebridge grants ls lists the grants and their ids")
	})
}

// edit rereads the file under its directory's lock, applies fn, and
// writes the result atomically.
func (s *Store) edit(fn func([]Grant) ([]Grant, error)) error {
	dir := filepath.Dir(s.path)
	if err := ensureDir(dir); err != nil {
		return err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	list, err := readFile(s.path)
	if err != nil {
		return err
	}
	list, err = fn(list)
	if err != nil {
		return err
	}
	doc := file{Grants: make([]Grant, len(list))}
	for i, g := range list {
		g.storable()
		doc.Grants[i] = g
	}
	var b bytes.Buffer
	b.WriteString("# gatebridge grants: edit with `gatebridge grants add|rm` (docs/approvals.md)\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	enc.Close()
	if b.Len() > maxFileBytes {
		// Written, it would be refused at every read: every call that
		// needs approval denied, in every process of the user.
		return hint.With(fmt.Errorf("approval: the grants file would be %d bytes, over its %d-byte limit: grant not kept", b.Len(), maxFileBytes),
			"remove grants you no longer need (gatebridge grants ls, gatebridge grants rm ID), or keep this one for the session")
	}
	if err := writeAtomic(s.path, b.Bytes()); err != nil {
		return err
	}
	s.mu.Lock()
	s.stamp = stamp{} // reread at the next List
	s.mu.Unlock()
	return nil
}

// parse reads the grants of a file's contents.
func parse(path string, data []byte) ([]Grant, error) {
	var doc file
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, hint.With(fmt.Errorf("approval: grants file %s: %v", path, err), "fix or remove the file; gatebridge grants ls shows what it holds")
	}
	seen := map[string]bool{}
	for i := range doc.Grants {
		g := &doc.Grants[i]
		if err := g.loaded(); err != nil {
			return nil, fmt.Errorf("approval: grants file %s: %w", path, err)
		}
		if g.ID == "" || seen[g.ID] {
			return nil, fmt.Errorf("approval: grants file %s: grant %d has no id or the id of another", path, i+1)
		}
		seen[g.ID] = true
		if g.Lifetime != LifeWorkspace && g.Lifetime != LifeAlways {
			return nil, fmt.Errorf("approval: grants file %s: grant %s: lifetime %q (only workspace and always grants are stored)", path, g.ID, g.Lifetime)
		}
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("approval: grants file %s: %s: %w", path, g.ID, err)
		}
	}
	return doc.Grants, nil
}
