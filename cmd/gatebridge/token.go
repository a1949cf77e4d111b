package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// loadToken reads the token of a network server (mcp --http, serve
// --listen) from --token-file; errors name the command and carry a hint.
func loadToken(command, path string) (string, error) {
	tok, err := readTokenFile(path)
	if err != nil {
		return "", withHint(fmt.Errorf("%s: --token-file: %w", command, err), "a file only you can read (chmod 600) holding one line, the token")
	}
	return tok, nil
}

// readTokenFile reads a token: a regular file no one else can read or
// write, holding one non-empty line.
func readTokenFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable or writable by others (mode %v)", path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s must hold one token (one line, no spaces)", path)
	}
	return tok, nil
}

// isLoopbackHost reports whether host (of host:port) can be reached only
// from this machine: localhost or a loopback address. "" (every
// interface) is not.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
