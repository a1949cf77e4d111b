//go:build unix

package hostilefs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadTrusted plants what another user, or a sandbox, can leave where
// the host reads its config or a secret: each is refused with the problem
// named, before anything is read, and a FIFO does not block.
func TestReadTrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacks chown files to another user")
	}
	const other = 12345
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	write := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte("data"), mode))
		must(t, os.Chmod(p, mode))
		must(t, os.Lchown(p, uid, 0))
		return p
	}
	ok := write("ok", 0o600, 0)
	theirs := write("theirs", 0o600, other)
	groupW := write("groupw", 0o620, 0)
	readable := write("readable", 0o644, 0)
	hard := write("hard", 0o600, 0)
	must(t, os.Link(hard, filepath.Join(dir, "hard2")))
	big := filepath.Join(dir, "big")
	must(t, os.WriteFile(big, make([]byte, 100), 0o600))
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "link")
	must(t, os.Symlink(ok, link))
	theirLink := filepath.Join(dir, "theirlink")
	must(t, os.Symlink(ok, theirLink))
	must(t, os.Lchown(theirLink, other, 0))
	openDir := filepath.Join(dir, "open")
	must(t, os.Mkdir(openDir, 0o777))
	must(t, os.Chmod(openDir, 0o777))
	inOpen := filepath.Join(openDir, "f")
	must(t, os.WriteFile(inOpen, []byte("x"), 0o600))
	sticky := filepath.Join(dir, "sticky")
	must(t, os.Mkdir(sticky, 0o777))
	must(t, os.Chmod(sticky, 0o777|os.ModeSticky))
	inSticky := filepath.Join(sticky, "f")
	must(t, os.WriteFile(inSticky, []byte("x"), 0o600))

	secret := Trust{MaxBytes: 10, Forbid: 0o077}
	config := Trust{MaxBytes: 10, Forbid: 0o022, Path: true}
	for _, tc := range []struct {
		path  string
		t     Trust
		want  TrustProblem
		where string // the object named, when not path
		kind  string
	}{
		{theirs, secret, TrustOwner, "", "file"},
		{theirs, config, TrustOwner, "", "file"},
		{groupW, config, TrustWritable, "", "file"},
		{groupW, secret, TrustWritable, "", "file"},
		{readable, secret, TrustReadable, "", "file"},
		{hard, secret, TrustHardLinks, "", "file"},
		{big, secret, TrustTooLarge, "", "file"},
		{fifo, secret, TrustNotRegular, "", "file"},
		{fifo, config, TrustNotRegular, "", "file"},
		{dir, secret, TrustNotRegular, "", "file"},
		{link, secret, TrustSymlink, "", "file"},
		{theirLink, config, TrustOwner, theirLink, "symlink"},
		{inOpen, config, TrustWritable, openDir, "directory"},
		{filepath.Join(ok, "x"), config, TrustNotDir, ok, "directory"},
		{filepath.Join(dir, "missing"), secret, TrustIO, "", "file"},
	} {
		done := make(chan struct{})
		var b []byte
		var err error
		go func() { b, _, err = ReadTrusted(tc.path, tc.t); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadTrusted(%s) blocked", tc.path)
		}
		var te *TrustError
		where := tc.where
		if where == "" {
			where = tc.path
		}
		if !errors.As(err, &te) || te.Problem != tc.want || te.Path != where || te.Kind != tc.kind {
			t.Errorf("ReadTrusted(%s, %+v) = %q, %v (%+v); want problem %d at %s %s", tc.path, tc.t, b, err, te, tc.want, tc.kind, where)
		}
	}
	var te *TrustError
	if _, _, err := ReadTrusted(theirs, secret); !errors.As(err, &te) || te.UID != other {
		t.Errorf("owner: %+v", te)
	}
	if _, _, err := ReadTrusted(hard, secret); !errors.As(err, &te) || te.Nlink != 2 {
		t.Errorf("hard links: %+v", te)
	}
	for _, tc := range []struct {
		path string
		t    Trust
		real string
	}{
		{ok, secret, ok},
		{link, config, ok},           // a link of ours: followed, resolved
		{inSticky, config, inSticky}, // a sticky directory others write (/tmp)
		{readable, config, readable}, // others may read a config
		{hard, config, hard},
	} {
		b, real, err := ReadTrusted(tc.path, tc.t)
		if err != nil || real != tc.real || len(b) == 0 {
			t.Errorf("ReadTrusted(%s) = %q, %q, %v; want it read from %s", tc.path, b, real, err, tc.real)
		}
	}
}
