package bwrap

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

func fakeHost(files map[string]string, uid int) hostProbe {
	return hostProbe{
		readFile: func(name string) ([]byte, error) {
			if v, ok := files[name]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("no such file")
		},
		exists: func(name string) bool { _, ok := files[name]; return ok },
		uid:    uid,
	}
}

func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		msg   string
		files map[string]string
		uid   int
		want  string
	}{
		{"userns off", "No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces",
			map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"}, 1000, "user.max_user_namespaces"},
		{"debian sysctl", "No permissions to creating new namespace",
			map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}, 1000, "unprivileged_userns_clone=1"},
		{"apparmor", "setting up uid map: Permission denied",
			map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}, 1000, "AppArmor"},
		{"apparmor irrelevant to root", "Can't mount proc on /newroot/proc: Operation not permitted",
			map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}, 0, "bwrap --unshare-all"},
		{"docker", "Creating new namespace failed: Operation not permitted",
			map[string]string{"/.dockerenv": ""}, 0, "inside a container"},
		{"kubernetes", "Can't mount proc on /newroot/proc: Operation not permitted",
			map[string]string{"/proc/1/cgroup": "0::/kubepods/besteffort/pod1"}, 0, "inside a container"},
		{"userns elsewhere", "setting up uid map: Permission denied", nil, 1000, "user namespaces are enabled"},
		{"missing path", "Can't find source path /x: No such file or directory", nil, 0, "path to mount is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := diagnose(tc.msg, fakeHost(tc.files, tc.uid)); !strings.Contains(got, tc.want) {
				t.Errorf("diagnose = %q, want it to mention %q", got, tc.want)
			}
		})
	}
}

func TestBwrapMessage(t *testing.T) {
	if got := bwrapMessage([]byte("noise\nbwrap: Can't mount proc: EPERM\n")); got != "Can't mount proc: EPERM" {
		t.Errorf("got %q", got)
	}
	if got := bwrapMessage(nil); got == "" {
		t.Error("empty message")
	}
}

// Binds are ordered parents first, the tmpfs /tmp before them, and the
// session's read-write dirs after its read-only root.
func TestBwrapArgsOrder(t *testing.T) {
	b := &Backend{Etc: []string{}}
	args := b.args(&sandbox.Spec{Command: []string{"sh"}},
		sandbox.SessionDirs{Root: "/tmp/s", Bin: "/tmp/s/bin", Calls: "/tmp/s/calls", Responses: "/tmp/s/responses", Tmp: "/tmp/s/tmp"},
		"/tmp/s/ws", []sandbox.Protected{{Rel: ".git", Host: "/tmp/s/ws/.git"}, {Rel: "x", Host: "/tmp/s/ws/x", Missing: true},
			{Rel: "t/u/hooks", Host: "/tmp/s/ws/t/u/hooks"}}, nil, bwrapFeatures{disableUserns: true})
	joined := strings.Join(args, " ")
	// The parents of the nested t/u/hooks are read-write mount points
	// between the workspace and the protected path.
	for _, order := range [][]string{
		{"--tmpfs /tmp", "--tmpfs /dev/shm", "--ro-bind /tmp/s /tmp/s", "--ro-bind /tmp/s/ws /tmp/s/ws",
			"--bind /tmp/s/calls /tmp/s/calls", "--ro-bind /tmp/s/ws/.git /tmp/s/ws/.git",
			"--tmpfs /tmp/s/ws/x --remount-ro /tmp/s/ws/x", "--remount-ro /dev --remount-ro / --chdir /tmp/s/ws", "-- sh"},
		{"--ro-bind /tmp/s/ws /tmp/s/ws", "--bind /tmp/s/ws/t /tmp/s/ws/t", "--bind /tmp/s/ws/t/u /tmp/s/ws/t/u",
			"--ro-bind /tmp/s/ws/t/u/hooks /tmp/s/ws/t/u/hooks", "--remount-ro /dev"},
	} {
		last := -1
		for _, o := range order {
			i := strings.Index(joined, o)
			if i < 0 || i < last {
				t.Fatalf("%q missing or out of order in\n%s", o, joined)
			}
			last = i
		}
	}
	for _, o := range []string{"--ro-bind /tmp/s/bin /tmp/s/bin", "--ro-bind /tmp/s/responses /tmp/s/responses",
		"--cap-drop ALL", "--unshare-all", "--die-with-parent", "--new-session", "--unshare-user --disable-userns"} {
		if !strings.Contains(joined, o) {
			t.Errorf("%q missing in\n%s", o, joined)
		}
	}
	for _, o := range []string{"/sys", "/home", "/root", "/run", "/var", "--clearenv", "--setenv"} {
		if strings.Contains(joined, " "+o) {
			t.Errorf("%q in\n%s", o, joined)
		}
	}
}

// A pinned path (opened by gatebridge, handed to bwrap) is mounted from
// its descriptor, read-write for a parent, read-only for a protected path.
func TestBwrapArgsPinned(t *testing.T) {
	b := &Backend{Etc: []string{}}
	args := b.args(&sandbox.Spec{Command: []string{"sh"}, WorkspaceWritable: true}, sandbox.SessionDirs{}, "/w",
		[]sandbox.Protected{{Rel: "t/hooks", Host: "/w/t/hooks"}, {Rel: ".git", Host: "/w/.git"}},
		map[string]int{"/w/t": 4, "/w/t/hooks": 5}, bwrapFeatures{bindFd: true})
	joined := strings.Join(args, " ")
	for _, o := range []string{"--bind /w /w --bind-fd 4 /w/t", "--ro-bind-fd 5 /w/t/hooks", "--ro-bind /w/.git /w/.git"} {
		if !strings.Contains(joined, o) {
			t.Errorf("%q missing in\n%s", o, joined)
		}
	}
}
