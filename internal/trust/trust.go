// Package trust reads the files a network server (serve --listen, mcp
// --http) takes its secrets from, and keeps those files out of every
// sandbox's reach.
package trust

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	//DELETEME
	"os"
	"path/filepath"
	"strings"

	"github.com/gatebridge/gatebridge/bridge/rpc"
	"github.com/gatebridge/gatebridge/internal/config"
	"github.com/gatebridge/gatebridge/internal/fspath"
	"github.com/gatebridge/gatebridge/internal/hint"
	"github.com/gatebridge/gatebridge/internal/hostilefs"
)

// The files a network server (serve --listen, mcp --http) reads its
// secrets from are refused unless they are what their owner made them:
// regular files, not links, owned by this process's user (or root), that
// no one else can change; the token and the TLS key no one else can read
// either, under one name only. A file another user owns, or a link,
// could have been planted; a file others can read has leaked.

// LoadToken reads the token of a network server (mcp --http, serve
// --listen) from --token-file; errors name the command and carry a hint.
func LoadToken(command, path string) (string, error) {
	tok, err := ReadToken(path)
	if err != nil {
		return "", hint.With(fmt.Errorf("%s: --token-file: %w", command, err), fileHint(err, "a file of yours only you can read (chmod 600) holding one line, the token"))
	}
	return tok, nil
}

// ReadToken reads a token: a secret file (see ReadSecretFile) holding
// one line, at least rpc.MinTokenBytes long (rpc.CheckToken: a shorter
// one falls to guessing), and not the deploy templates' placeholder.
func ReadToken(path string) (string, error) {
	b, err := ReadSecretFile(path, ModeToken, 4096)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	newToken := fmt.Sprintf("write a random one: openssl rand -hex 32 > %s; chmod 600 %s", path, path)
	switch {
	case tok == "" || strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("%s must hold one token (one line, no spaces)", path)
	case strings.HasPrefix(tok, "REPLACE_"):
		return "", &FileError{fmt.Sprintf("%s holds a template's placeholder (%s), which anyone can read, not a token", path, tok), newToken}
	}
	if err := rpc.CheckToken(tok); err != nil {
		return "", &FileError{fmt.Sprintf("%s: %v", path, err), newToken}
	}
	return tok, nil
}

// maxPEMBytes caps a TLS certificate chain or key file.
const maxPEMBytes = 1 << 20

// LoadKeyPair reads a TLS certificate (a file no one else can change)
// and its private key (a secret file: see ReadSecretFile).
func LoadKeyPair(command, certPath, keyPath string) (tls.Certificate, error) {
	certPEM, err := ReadSecretFile(certPath, ModePublic, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, hint.With(fmt.Errorf("%s: --tls-cert: %w", command, err), fileHint(err, "a PEM file of yours (or root's) that only its owner can write"))
	}
	keyPEM, err := ReadSecretFile(keyPath, ModeKey, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, hint.With(fmt.Errorf("%s: --tls-key: %w", command, err), fileHint(err, "a PEM file of yours (or root's) that only its owner can write and others cannot read (chmod 600, or 640 for a group such as ssl-cert)"))
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, hint.With(fmt.Errorf("%s: --tls-cert %s, --tls-key %s: %w", command, certPath, keyPath, err),
			"both must be PEM files: the certificate (chain) and its private key")
	}
	return cert, nil
}

// FileError is a file refused by ReadSecretFile for what it is (its
// type, owner, mode, links), with the hint that fixes it ("": the
// caller's).
type FileError struct{ Msg, Help string }

func (e *FileError) Error() string { return e.Msg }

// Hint says how to fix the file ("": the caller's hint).
func (e *FileError) Hint() string { return e.Help }

// fileHint is the hint for err from ReadSecretFile: the one that
// fixes the file, or def.
func fileHint(err error, def string) string {
	return cmp.Or(hint.Of(err), def)
}

// What of a secret file's mode its group and others may not have.
const (
	ModeToken  os.FileMode = 0o077 // anything
	ModeKey    os.FileMode = 0o027 // write; others read (a group such as Debian's ssl-cert may read)
	ModePublic os.FileMode = 0o022 // write
)

// ReadSecretFile reads at most max bytes of path, opened without
// following a link there (O_NOFOLLOW) or blocking on a FIFO, and checked
// on the opened file (fstat): a regular file, owned by this process's
// effective uid or by root, whose mode grants nothing of forbid. One that
// others may not read (a token, a key) must have one name only: another
// hard link (in a workspace, say) would reach it under a path no check
// sees (hostilefs.ReadTrusted; the messages are worded here).
func ReadSecretFile(path string, forbid os.FileMode, max int64) ([]byte, error) {
	b, _, err := hostilefs.ReadTrusted(path, hostilefs.Trust{MaxBytes: max, Forbid: forbid})
	var te *hostilefs.TrustError
	if err == nil || !errors.As(err, &te) {
		return b, err
	}
	me := os.Geteuid()
	switch te.Problem {
	case hostilefs.TrustSymlink:
		return nil, &FileError{fmt.Sprintf("%s is a symbolic link (refused: it may point anywhere)", path),
			"give the file itself, not a link to it (realpath " + path + ")"}
	case hostilefs.TrustNotRegular:
		return nil, &FileError{fmt.Sprintf("%s is not a regular file", path), ""}
	case hostilefs.TrustOwner:
		return nil, &FileError{fmt.Sprintf("%s is owned by uid %d, not by this user (uid %d) or root: another user could have written it", path, te.UID, me),
			fmt.Sprintf("make it yours (chown %d %s), or write it again as this user", me, path)}
	case hostilefs.TrustWritable:
		return nil, &FileError{fmt.Sprintf("%s is writable by others (mode %v)", path, te.Mode), ""}
	case hostilefs.TrustReadable:
		return nil, &FileError{fmt.Sprintf("%s is readable by others (mode %v)", path, te.Mode), ""}
	case hostilefs.TrustHardLinks:
		return nil, &FileError{fmt.Sprintf("%s has %d hard links: under another name (in a workspace, say) it could be read", path, te.Nlink),
			"keep one name for it: copy it (cp) and remove the other links"}
	case hostilefs.TrustTooLarge:
		return nil, &FileError{fmt.Sprintf("%s is over %d bytes", path, max), ""}
	case hostilefs.TrustIO:
		if te.Op == "read" {
			return nil, te.Err
		}
		return nil, &fs.PathError{Op: te.Op, Path: path, Err: te.Err}
	}
	return nil, err
}

// A SecretFile is a file a network server read a secret from: its token
// file or TLS key. Flag names it ("--token-file").
type SecretFile struct{ Flag, Path string }

// A Reachable is a directory a sandbox can read (or a gate reads for it),
// named by what made it so (a config key, a flag).
type Reachable struct{ What, Path string }

// ReachableOf lists the directories the config lets every sandbox read,
// besides its workspace: the file gates' roots and the docker sessions
// root (mounted whole into a persistent sandbox).
func ReachableOf(cfg *config.Config) []Reachable {
	var out []Reachable
	for _, r := range []Reachable{
		{"gates.root", cfg.Gates.Root},
		{"gates.writable_root", cfg.Gates.WritableRoot},
		{"sandbox.docker.sessions_root", cfg.Sandbox.Docker.SessionsRoot},
	} {
		if r.Path != "" {
			out = append(out, r)
		}
	}
	return out
}

// Guard keeps secrets out of the sandbox's reach: it returns an
// error now when one of places holds one of them, and makes opts refuse
// sandbox/open on a workspace that holds one (the sandboxed command could
// read the token or key, and with it connect as a client). Paths are
// compared with their links resolved; the secret files have one name
// only (ReadSecretFile), so another hard link cannot hide them. Both
// serve --listen and mcp --http call it with the files they read.
func Guard(opts *rpc.Options, places []Reachable, secrets []SecretFile) error {
	resolved := make([]SecretFile, 0, len(secrets))
	for _, s := range secrets {
		if s.Path != "" {
			// The file itself is no link (ReadSecretFile): its directory may be.
			resolved = append(resolved, SecretFile{s.Flag, filepath.Join(ResolvePath(filepath.Dir(s.Path)), filepath.Base(s.Path))})
		}
	}
	holding := func(dir string) (SecretFile, bool) {
		dir = ResolvePath(dir)
		for _, s := range resolved {
			if fspath.Within(s.Path, dir) {
				return s, true
			}
		}
		return SecretFile{}, false
	}
	for _, p := range places {
		if s, ok := holding(p.Path); ok {
			return &config.Error{Key: p.What, Msg: fmt.Sprintf("%s holds %s (%s), which the sandbox could read", p.Path, s.Path, s.Flag), Help: secretsOutsideHint}
		}
	}
	if len(resolved) == 0 {
		return nil
	}
	next := opts.CheckWorkspace
	opts.CheckWorkspace = func(workspace string, writable bool) error {
		if s, ok := holding(workspace); ok {
			return &rpc.Error{Code: rpc.CodeInvalidParams,
				Message: fmt.Sprintf("refusing workspace %s: it holds %s (%s), which the sandboxed command could read", workspace, s.Path, s.Flag),
				Data:    map[string]string{"hint": secretsOutsideHint}}
		}
		if next != nil {
			return next(workspace, writable)
		}
		return nil
	}
	return nil
}

const secretsOutsideHint = "keep the token file and the TLS key outside every workspace and every directory the sandbox or its gates can read"

// ResolvePath is p made absolute, its links resolved as far as they
// exist.
func ResolvePath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}
