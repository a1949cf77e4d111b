package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The ACLs GrantSession writes in the kernel's binary format read back,
// through getfacl, as exactly one named-user entry per directory and
// nothing for group or other. Setting ACLs on our own files needs no root.
func TestGrantACLFormat(t *testing.T) {
	if _, err := exec.LookPath("getfacl"); err != nil {
		t.Skip("no getfacl to read the ACLs back")
	}
	root := t.TempDir()
	d := SessionDirs{Root: root, Bin: filepath.Join(root, "bin"), Calls: filepath.Join(root, "calls"),
		Responses: filepath.Join(root, "responses"), Tmp: filepath.Join(root, "tmp")}
	for _, p := range []string{d.Bin, d.Calls, d.Responses, d.Tmp} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := grantACL(d, 4242); errors.Is(err, errNoACL) {
		t.Skipf("the filesystem of %s has no POSIX ACLs", root)
	} else if err != nil {
		t.Fatal(err)
	}
	getfacl := func(args ...string) string {
		b, err := exec.Command("getfacl", append([]string{"-n", "-c"}, args...)...).Output()
		if err != nil {
			t.Fatalf("getfacl %v: %v %s", args, err, b)
		}
		return strings.Join(strings.Fields(string(b)), " ")
	}
	for _, c := range []struct{ path, want string }{
		{d.Root, "user::rwx user:4242:--x group::--- mask::--x other::---"},
		{d.Bin, "user::rwx user:4242:r-x group::--- mask::r-x other::---"},
		{d.Calls, "user::rwx user:4242:rwx group::--- mask::rwx other::--- " +
			"default:user::rwx default:user:4242:rwx default:group::--- default:mask::rwx default:other::---"},
		{d.Responses, "user::rwx user:4242:r-x group::--- mask::r-x other::--- " +
			"default:user::rwx default:user:4242:r-- default:group::--- default:mask::r-- default:other::---"},
	} {
		if got := getfacl(c.path); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.path, got, c.want)
		}
	}
	// A response the host writes later (0640) is readable by 4242 alone.
	f := filepath.Join(d.Responses, "k.stdout")
	if err := os.WriteFile(f, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, want := getfacl(f), "user::rw- user:4242:r-- group::--- mask::r-- other::---"; got != want {
		t.Errorf("response file:\n got %s\nwant %s", got, want)
	}
	// A symlink in place of a directory is refused, never followed.
	os.Remove(d.Tmp)
	os.Symlink(t.TempDir(), d.Tmp)
	if err := grantACL(d, 4242); err == nil {
		t.Error("grantACL followed a symlinked tmp/")
	}
}
