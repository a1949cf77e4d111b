package docker

import (
	"slices"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
)

// docker is offered only by a program that registers it, and its
// constructor reads its Config from the settings.
func TestRegister(t *testing.T) {
	reg := sandbox.NewRegistry()
	if _, err := reg.Lookup(Name); err == nil {
		t.Fatal("docker is registered without Register")
	}
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg); err == nil {
		t.Error("registering docker twice succeeded")
	}
	if !slices.Contains(reg.Names(), Name) {
		t.Fatalf("names = %v", reg.Names())
	}
	e, _ := reg.Lookup(Name)
	b, err := e.New(sandbox.Settings{Extra: map[string]any{Name: Config{Image: "example/img:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close(b)
	if d := b.(*Backend); d.Config().Image != "example/img:1" {
		t.Errorf("image = %q", d.Config().Image)
	}
	if in, ok := b.(sandbox.WorkspaceMapper).WorkspaceInside("/home/u/ws"); !ok || in != DefaultWorkspacePath {
		t.Errorf("WorkspaceInside = %q, %v", in, ok)
	}
	// Settings.Image (serve's sandbox/open "image") wins over the Config's.
	if !e.Images {
		t.Error("the docker entry does not say it runs images")
	}
	b2, err := e.New(sandbox.Settings{Image: "other/img:2", Extra: map[string]any{Name: Config{Image: "example/img:1", Memory: 7 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close(b2)
	if c := b2.(*Backend).Config(); c.Image != "other/img:2" || c.Memory != 7<<20 {
		t.Errorf("with Settings.Image: image %q memory %d", c.Image, c.Memory)
	}
}

func TestWakeFinding(t *testing.T) {
	if f, ok := wakeFinding("Docker Desktop"); !ok || f.Status != sandbox.StatusWarn {
		t.Errorf("Docker Desktop: %+v %v", f, ok)
	}
	if _, ok := wakeFinding("Debian GNU/Linux 13"); ok {
		t.Error("warned on a Linux engine")
	}
}

// A zero Config field takes its default; -1 (no limit) and a set value
// stay.
func TestConfigDefaults(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Image != TestImage || d.Memory != DefaultMemory || d.NanoCPUs != DefaultNanoCPUs || d.PidsLimit != DefaultPidsLimit ||
		d.Network != DefaultNetwork || d.TmpfsSize != DefaultTmpfsSize || d.SessionPath != DefaultSessionPath ||
		d.WorkspacePath != DefaultWorkspacePath || d.PullProgress == nil {
		t.Errorf("defaults: %+v", d)
	}
	c := Config{Image: "i", Memory: -1, NanoCPUs: -1, PidsLimit: 7, Network: "host", TmpfsSize: 1, SessionPath: "/s", WorkspacePath: "/w"}.withDefaults()
	if c.Image != "i" || c.Memory != -1 || c.NanoCPUs != -1 || c.PidsLimit != 7 || c.Network != "host" || c.TmpfsSize != 1 ||
		c.SessionPath != "/s" || c.WorkspacePath != "/w" {
		t.Errorf("set values changed: %+v", c)
	}
}
