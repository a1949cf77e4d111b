package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/moby/moby/client"

	"github.com/gatebridge/gatebridge/sandbox"
)

// Pull policies for [Config.Pull] (config sandbox.docker.pull).
const (
	PullMissing = "missing" // pull the image when it is not present (default)
	PullNever   = "never"   // a missing image is an error ([sandbox.ErrImageMissing])
)

// DefaultPullTimeout bounds a pull when [Config.PullTimeout] is zero.
const DefaultPullTimeout = 10 * time.Minute

// ImagesKey is the config key of the image allowlist, named in its errors.
const ImagesKey = "sandbox.docker.images"

// imagePolicy is the allowlist [Config.Images] compiled: references
// normalised as the engine resolves them ([reference.ParseDockerRef]:
// docker.io/library/ for short names, :latest when untagged, the tag
// dropped when a digest is given), so that two spellings of one image
// compare equal and a different image never does.
type imagePolicy struct {
	def   string          // the default image, normalised ("" when it does not parse)
	raw   string          // the default image as configured
	exact map[string]bool // normalised references
	repos map[string]bool // repository names (REPO:*)
}

// NormalizeImage returns ref as the engine resolves it, fully qualified:
// "ubuntu" is docker.io/library/ubuntu:latest, and
// "ubuntu:latest@sha256:…" is docker.io/library/ubuntu@sha256:… (the
// engine runs the digest and ignores the tag). Upper case in a
// repository, an empty or malformed reference, and a bare 64-hex image
// id are errors.
func NormalizeImage(ref string) (string, error) {
	r, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

// ValidateImages checks the entries of an allowlist ([Config.Images]),
// for a configuration loader; the error names [ImagesKey].
func ValidateImages(entries []string) error {
	_, err := newImagePolicy("", entries)
	return err
}

// newImagePolicy compiles the allowlist; nil when it is empty (any image
// is allowed). def is the default image, always allowed.
func newImagePolicy(def string, entries []string) (*imagePolicy, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	p := &imagePolicy{raw: def, exact: map[string]bool{}, repos: map[string]bool{}}
	p.def, _ = NormalizeImage(def)
	for _, e := range entries {
		if repo, ok := strings.CutSuffix(e, ":*"); ok {
			named, err := reference.ParseNormalizedNamed(repo)
			if err == nil && !reference.IsNameOnly(named) {
				err = errors.New("REPO:* takes a repository without a tag or digest")
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", ImagesKey, e, err)
			}
			p.repos[named.Name()] = true
			continue
		}
		n, err := NormalizeImage(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an image reference (REPO[:TAG][@DIGEST], or REPO:* for any tag or digest): %w", ImagesKey, e, err)
		}
		p.exact[n] = true
	}
	return p, nil
}

// allow returns the reference to run for image (normalised, so the engine
// cannot read it as something else, e.g. an image id prefix), or an error
// wrapping [sandbox.ErrImageRefused]. A nil policy allows anything as
// given.
func (p *imagePolicy) allow(image string) (string, error) {
	if p == nil {
		return image, nil
	}
	if image == p.raw {
		return cmpNonEmpty(p.def, image), nil
	}
	n, err := NormalizeImage(image)
	if err != nil {
		return "", &sandbox.Error{Backend: Name, Op: "check image " + image,
			Err:  fmt.Errorf("%w: %q is not an image reference, and %s allows only listed ones: %w", sandbox.ErrImageRefused, image, ImagesKey, err),
			Help: "give a reference such as ubuntu:24.04 or registry.example/team/img@sha256:… (lower case), allowed by " + ImagesKey}
	}
	if n == p.def || p.exact[n] {
		return n, nil
	}
	if r, err := reference.ParseNormalizedNamed(n); err == nil && p.repos[r.Name()] {
		return n, nil
	}
	return "", &sandbox.Error{Backend: Name, Op: "check image " + image,
		Err: fmt.Errorf("%w: image %s (%s) is not in %s", sandbox.ErrImageRefused, image, n, ImagesKey),
		Help: fmt.Sprintf("add %q (or %q for any tag) to %s, or open the sandbox with the default image %s",
			image, familiarRepo(n)+":*", ImagesKey, p.raw)}
}

func cmpNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// familiarRepo is the short repository name of a normalised reference
// (ubuntu for docker.io/library/ubuntu:latest).
func familiarRepo(n string) string {
	r, err := reference.ParseNormalizedNamed(n)
	if err != nil {
		return n
	}
	return reference.FamiliarName(r)
}

// EnsureImage readies the configured image for a sandbox: allowed by
// [Config.Images] (checked first: a refused image never reaches the
// engine or a registry), present, else pulled (progress on
// [Config.PullProgress], bounded by [Config.PullTimeout]) unless
// [Config.Pull] is [PullNever]. Every path that opens a docker sandbox
// goes through it ([Backend.Check], which run and serve's Prepare call,
// and [Backend.Start] for persistent and serve's sandboxes). Errors are
// [*sandbox.Error]s wrapping [sandbox.ErrImageRefused],
// [sandbox.ErrImageMissing] (not present, pulling off) or
// [sandbox.ErrImagePull], each with a hint.
func (b *Backend) EnsureImage(ctx context.Context) error {
	if _, err := b.policy.allow(b.cfg.Image); err != nil {
		return err
	}
	ok, err := b.ImagePresent(ctx)
	if err != nil || ok {
		return err
	}
	if b.cfg.Pull == PullNever {
		return &sandbox.Error{Backend: Name, Op: "find image " + b.cfg.Image,
			Err:  fmt.Errorf("%w: %w: image %s is not present (sandbox.docker.pull is never)", sandbox.ErrUnavailable, sandbox.ErrImageMissing, b.cfg.Image),
			Help: imageHint(b.cfg.Image) + "; or set sandbox.docker.pull: missing to let gatebridge pull it"}
	}
	fmt.Fprintf(b.cfg.PullProgress, "gatebridge: image %s not found locally, pulling\n", b.cfg.Image)
	if perr := b.pull(ctx); perr != nil {
		return &sandbox.Error{Backend: Name, Op: "pull image " + b.cfg.Image,
			Err: fmt.Errorf("%w: %w: image %s is not present and pulling it failed: %w", sandbox.ErrUnavailable, sandbox.ErrImagePull, b.cfg.Image, perr),
			Help: "check that the image's registry answers and has this tag (`docker pull " + b.cfg.Image + "` shows the engine's own error); " +
				"sandbox.docker.pull_timeout bounds the pull; or " + imageHint(b.cfg.Image)}
	}
	return nil
}

// pull pulls the configured image within [Config.PullTimeout].
func (b *Backend) pull(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, b.cfg.PullTimeout)
	defer cancel()
	err := b.pullStream(pctx)
	if err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("timed out after %s (sandbox.docker.pull_timeout): %w", b.cfg.PullTimeout, err)
	}
	return err
}

func (b *Backend) pullStream(ctx context.Context) error {
	resp, err := b.cli.ImagePull(ctx, b.cfg.Image, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return err
		}
		if msg.Error != nil {
			return errors.New(msg.Error.Message)
		}
		line := msg.Status
		if msg.ID != "" {
			line = msg.ID + ": " + line
		}
		if p := msg.Progress; p != nil && p.Total > 0 {
			line += fmt.Sprintf(" %d/%d", p.Current, p.Total)
		}
		_, _ = io.WriteString(b.cfg.PullProgress, line+"\n")
	}
	return ctx.Err()
}
