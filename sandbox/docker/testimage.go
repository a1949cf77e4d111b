package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// TestImage is the image built by [BuildTestImage] and the default
// [Config.Image].
const TestImage = "gatebridge-test:latest"

// TestImageOptions configure [BuildTestImage]. Zero values mean the
// defaults documented on each field.
type TestImageOptions struct {
	// Ref is the image reference to create; default [TestImage].
	Ref string
	// Busybox is a static busybox binary on the host; default /bin/busybox
	// (Debian's busybox-static).
	Busybox string
	// Bash is a static bash binary on the host; default /bin/bash-static
	// (Debian's bash-static). Empty after defaulting and missing on disk
	// means the image has no bash.
	Bash string
	// Force rebuilds the image even when it is present.
	Force bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// BuildTestImage creates a tiny image from host binaries without a
// registry: /bin/busybox with its applets as symlinks (sh, cat, setsid,
// kill, …), /bin/bash from bash-static, /etc/passwd and /etc/group with
// nobody (65534), /tmp (1777) and /workspace, imported with
// PATH and CMD ["/bin/sh"]. It does nothing when the image exists unless
// opts.Force. It returns whether it built the image.
func BuildTestImage(ctx context.Context, cli client.APIClient, opts TestImageOptions) (built bool, err error) {
	if opts.Ref == "" {
		opts.Ref = TestImage
	}
	if opts.Busybox == "" {
		opts.Busybox = "/bin/busybox"
	}
	if opts.Bash == "" {
		opts.Bash = "/bin/bash-static"
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	if !opts.Force {
		if _, err := cli.ImageInspect(ctx, opts.Ref); err == nil {
			fmt.Fprintf(logw, "image %s present (use -force to rebuild)\n", opts.Ref)
			return false, nil
		} else if !cerrdefs.IsNotFound(err) {
			return false, fmt.Errorf("inspect image %s: %w", opts.Ref, err)
		}
	}
	layer, err := testImageTar(opts.Busybox, opts.Bash)
	if err != nil {
		return false, err
	}
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(layer), SourceName: "-"}, opts.Ref,
		client.ImageImportOptions{
			Message: "gatebridge test image (busybox-static + bash-static)",
			Changes: []string{
				"ENV PATH=" + DefaultPath,
				`CMD ["/bin/sh"]`,
				"WORKDIR /workspace",
			},
		})
	if err != nil {
		return false, fmt.Errorf("import image %s: %w", opts.Ref, err)
	}
	defer resp.Close()
	out, err := io.ReadAll(resp)
	if err != nil {
		return false, fmt.Errorf("import image %s: %w", opts.Ref, err)
	}
	// The import stream reports failures in-band as {"errorDetail":…}.
	if bytes.Contains(out, []byte(`"errorDetail"`)) || bytes.Contains(out, []byte(`"error"`)) {
		return false, fmt.Errorf("import image %s: %s", opts.Ref, bytes.TrimSpace(out))
	}
	fmt.Fprintf(logw, "built %s (%d KiB layer)\n", opts.Ref, len(layer)>>10)
	return true, nil
}

func testImageTar(busybox, bash string) ([]byte, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("read busybox (install busybox-static): %w", err)
	}
	listOut, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	var bashBin []byte
	if bash != "" {
		if bashBin, err = os.ReadFile(bash); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("read bash: %w", err)
		}
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Unix(0, 0)
	hdr := func(h *tar.Header) error {
		h.ModTime = now
		h.Format = tar.FormatPAX
		return tw.WriteHeader(h)
	}
	dir := func(name string, mode int64) error {
		return hdr(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := hdr(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"bin", "etc", "usr", "usr/bin", "usr/local", "usr/local/bin", "workspace", "gatebridge", "root", "home", "dev", "proc", "sys"} {
		if err := dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := file("bin/busybox", 0o755, bb); err != nil {
		return nil, err
	}
	for _, name := range strings.Fields(string(listOut)) {
		if name == "busybox" || name == "bash" || strings.Contains(name, "/") {
			continue
		}
		if err := hdr(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + name, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if bashBin != nil {
		if err := file("bin/bash", 0o755, bashBin); err != nil {
			return nil, err
		}
	}
	// /usr/bin/env is what `#!/usr/bin/env sh` scripts expect.
	if err := hdr(&tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/bin/env", Linkname: "/bin/busybox", Mode: 0o777}); err != nil {
		return nil, err
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	group := "root:x:0:\nnogroup:x:65534:\n"
	if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
