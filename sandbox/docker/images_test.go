package docker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatebridge/gatebridge/sandbox"
	"github.com/moby/moby/client"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestImagePolicy: each spelling trick is judged as the engine would
// resolve the reference, so an image outside sandbox.docker.images cannot
// slip through, and two spellings of an allowed one are both allowed.
func TestImagePolicy(t *testing.T) {
	p, err := newImagePolicy("gatebridge-test:latest", []string{"ubuntu:24.04", "registry.example/team/tool:*", "alpine@" + digest})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		image string
		ok    bool
		run   string // the reference run, when allowed
	}{
		{"gatebridge-test:latest", true, "docker.io/library/gatebridge-test:latest"},
		{"gatebridge-test", true, "docker.io/library/gatebridge-test:latest"}, // the default, spelled short
		{"docker.io/library/gatebridge-test:latest", true, "docker.io/library/gatebridge-test:latest"},
		{"gatebridge-test:other", false, ""},
		{"ubuntu:24.04", true, "docker.io/library/ubuntu:24.04"},
		{"docker.io/library/ubuntu:24.04", true, "docker.io/library/ubuntu:24.04"},
		{"index.docker.io/library/ubuntu:24.04", true, "docker.io/library/ubuntu:24.04"},
		{"ubuntu", false, ""},                 // :latest, not listed
		{"ubuntu:latest", false, ""},          // another tag
		{"ubuntu:24.04@" + digest, false, ""}, // the engine runs the digest, whatever the tag says
		{"ubuntu@" + digest, false, ""},
		{"UBUNTU:24.04", false, ""},          // not a reference (upper case)
		{"Ubuntu:24.04", false, ""},          // idem
		{"evil.com/ubuntu:24.04", false, ""}, // another registry
		{"evil.com/library/ubuntu:24.04", false, ""},
		{"localhost/ubuntu:24.04", false, ""},
		{"docker.io/ubuntu:24.04", true, "docker.io/library/ubuntu:24.04"}, // the same image
		{"registry.example/team/tool:1", true, "registry.example/team/tool:1"},
		{"registry.example/team/tool", true, "registry.example/team/tool:latest"},
		{"registry.example/team/tool@" + digest, true, "registry.example/team/tool@" + digest},
		{"registry.example/team/tool:x@" + digest, true, "registry.example/team/tool@" + digest},
		{"registry.example/team/tool-evil:1", false, ""}, // a prefix is not the repository
		{"registry.example/team/tool/sub:1", false, ""},
		{"registry.example:443/team/tool:1", false, ""}, // another host:port
		{"evil.com/registry.example/team/tool:1", false, ""},
		{"alpine@" + digest, true, "docker.io/library/alpine@" + digest},
		{"alpine:3.20@" + digest, true, "docker.io/library/alpine@" + digest}, // the tag is ignored by the engine
		{"alpine:3.20", false, ""},
		{"alpine", false, ""},
		{"", false, ""},
		{"sha256:" + digest[7:], false, ""}, // an image id
		{digest[7:], false, ""},
		{"0123456789ab", false, ""}, // an image id prefix is read as a repository
		{"ubuntu:24.04 ", false, ""},
		{"-v /:/host", false, ""},
	} {
		run, err := p.allow(c.image)
		if c.ok && (err != nil || run != c.run) {
			t.Errorf("%q: got %q, %v; want allowed as %q", c.image, run, err, c.run)
		}
		if !c.ok {
			if err == nil {
				t.Errorf("%q: allowed as %q; want refused", c.image, run)
				continue
			}
			if !errors.Is(err, sandbox.ErrImageRefused) || !strings.Contains(err.Error(), ImagesKey) {
				t.Errorf("%q: %v; want ErrImageRefused naming %s", c.image, err, ImagesKey)
			}
			var se *sandbox.Error
			if !errors.As(err, &se) || se.Hint() == "" {
				t.Errorf("%q: %v has no hint", c.image, err)
			}
		}
	}
}

// TestImagePolicyEmpty: no list allows any image, as given.
func TestImagePolicyEmpty(t *testing.T) {
	p, err := newImagePolicy("gatebridge-test:latest", nil)
	if err != nil || p != nil {
		t.Fatalf("%v, %v", p, err)
	}
	if run, err := p.allow("Whatever"); err != nil || run != "Whatever" {
		t.Errorf("%q, %v", run, err)
	}
}

// TestImagePolicyBadEntries: an entry that is not a reference is a
// configuration error naming the key.
func TestImagePolicyBadEntries(t *testing.T) {
	for _, e := range []string{"UBUNTU:*", "ubuntu:24.04:*", "ubuntu@" + digest + ":*", "", "*", "Ubuntu"} {
		if _, err := newImagePolicy("x", []string{e}); err == nil || !strings.Contains(err.Error(), ImagesKey) {
			t.Errorf("%q: %v", e, err)
		}
	}
}

// TestNewRefusesImage: a refused image is refused by New, through the
// registry entry that serve's sandbox/open uses, before any engine call
// (an engine that counts requests sees none), also by Available and
// EnsureImage; the configured default is allowed even when not listed.
func TestNewRefusesImage(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	cli, err := client.New(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithAPIVersion("1.44"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	base := Config{Image: "gatebridge-test:latest", Images: []string{"ubuntu:*"}, Client: cli}
	e := Entry()
	for _, c := range []struct {
		image string
		ok    bool
	}{{"", true}, {"gatebridge-test", true}, {"ubuntu:22.04", true}, {"evil.com/ubuntu:22.04", false}, {"debian", false}} {
		b, err := e.New(sandbox.Settings{Image: c.image, Extra: map[string]any{Name: base}})
		if c.ok != (err == nil) {
			t.Errorf("%q: %v", c.image, err)
		}
		if err == nil {
			sandbox.Close(b)
		} else if !errors.Is(err, sandbox.ErrImageRefused) {
			t.Errorf("%q: %v is not ErrImageRefused", c.image, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the engine was called %d times", n)
	}
	// A Backend made without the policy and given one later cannot exist
	// (the fields are private); EnsureImage and Available check it again.
	b := &Backend{cfg: Config{Image: "debian"}.withDefaults(), cli: cli}
	b.policy, _ = newImagePolicy("gatebridge-test:latest", []string{"ubuntu:*"})
	for name, err := range map[string]error{"EnsureImage": b.EnsureImage(context.Background()), "available": b.available(context.Background())} {
		if !errors.Is(err, sandbox.ErrImageRefused) {
			t.Errorf("%s: %v is not ErrImageRefused", name, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the engine was called %d times", n)
	}
}

// TestImageHintNormalised: the test image spelled in full (as it runs
// under an allowlist) still gets the hint to build it.
func TestImageHintNormalised(t *testing.T) {
	for _, img := range []string{TestImage, "docker.io/library/" + TestImage, "gatebridge-test"} {
		if !strings.Contains(imageHint(img), "make test-image") {
			t.Errorf("%s: %s", img, imageHint(img))
		}
	}
}
