package httpgate

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// canonURL is a URL in the one form the policy checks and the request is
// sent to: so that what is checked is what is fetched.
type canonURL struct {
	scheme string // http or https
	host   string // lower-case ASCII (IDNA), or an IP address (IPv6 without brackets)
	port   string // "" for the scheme's default
	path   string // starts with "/": dot segments resolved, percent-encoding normalized
	query  string // without "?", percent-encoding normalized; "" for none
	ip     netip.Addr
}

// String is the URL as sent (no userinfo, no fragment).
func (u canonURL) String() string {
	s := u.scheme + "://" + u.hostPort(false) + u.path
	if u.query != "" {
		s += "?" + u.query
	}
	return s
}

// hostPort is host[:port], the IPv6 address in brackets; with withDefault
// the scheme's port when none was given.
func (u canonURL) hostPort(withDefault bool) string {
	h := u.host
	if u.ip.Is6() {
		h = "[" + h + "]"
	}
	p := u.port
	if p == "" && withDefault {
		p = defaultPort[u.scheme]
	}
	if p == "" {
		return h
	}
	return h + ":" + p
}

var defaultPort = map[string]string{"http": "80", "https": "443"}

// urlError is a URL the gate refuses; denied ones are policy (126),
// others usage (2).
type urlError struct {
	msg    string
	denied bool
}

func (e *urlError) Error() string { return e.msg }

func usageURL(format string, a ...any) error { return &urlError{msg: fmt.Sprintf(format, a...)} }
func deniedURL(format string, a ...any) error {
	return &urlError{msg: fmt.Sprintf(format, a...), denied: true}
}

// parseURL makes raw canonical: an absolute http or https URL, no
// userinfo, the host lower-cased and IDNA-encoded (or an IP address in
// its one form, the numeric IPv4 forms a browser reads, such as 2130706433
// or 0x7f.1, included), the default port dropped, the path's dot segments
// resolved and its percent-encoding normalized (unreserved characters
// decoded, other escapes upper-case, bytes that need it encoded). A path
// that still holds a dot segment once fully decoded (an encoded / or \
// beside ..), or one with a path parameter (..;x), is refused: a server
// that decodes, or drops parameters, before it resolves would read
// another path than the one checked.
func parseURL(raw string) (canonURL, error) {
	if strings.ContainsAny(raw, "\r\n\x00") {
		return canonURL{}, deniedURL("the URL holds a line break or a NUL byte")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return canonURL{}, usageURL("bad URL: %v", errors.Unwrap(err))
	}
	switch {
	case u.Scheme == "":
		return canonURL{}, usageURL("%q is not an absolute URL: write http://… or https://…", cut(raw, 80))
	case u.Scheme != "http" && u.Scheme != "https":
		return canonURL{}, deniedURL("scheme %q is not allowed: only http and https", cut(u.Scheme, 20))
	case u.Opaque != "" || u.Host == "":
		return canonURL{}, usageURL("%q has no host: write %s://HOST/PATH", cut(raw, 80), u.Scheme)
	case u.User != nil:
		return canonURL{}, deniedURL("a URL with userinfo (user:password@) is not allowed: credentials come from the gate's rules")
	}
	c := canonURL{scheme: u.Scheme}
	if c.host, c.ip, err = canonHost(u.Host, u.Hostname()); err != nil {
		return canonURL{}, err
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return canonURL{}, usageURL("bad port %q", cut(p, 10))
		}
		if p = strconv.Itoa(n); p != defaultPort[c.scheme] {
			c.port = p
		}
	}
	// A \ (which a browser reads as /) is escaped here: %5C, data to
	// most servers; one beside a dot segment is refused below.
	c.path = removeDotSegments(normEscapes(u.EscapedPath(), pathChars))
	if c.path == "" || c.path[0] != '/' {
		c.path = "/" + c.path
	}
	if dec, err := url.PathUnescape(c.path); err == nil {
		for _, seg := range strings.FieldsFunc(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
			if seg == "." || seg == ".." {
				return canonURL{}, deniedURL("the path %q hides a dot segment behind an encoded / or \\", cut(c.path, 80))
			}
			// "..;x" is ".." to a server that drops path parameters
			// before it resolves (Tomcat, Spring, Jetty): /api/..;/admin.
			if p, _, ok := strings.Cut(seg, ";"); ok && (p == "." || p == "..") {
				return canonURL{}, deniedURL("the path %q has a dot segment with a parameter (%s), which a server may resolve as a dot segment", cut(c.path, 80), cut(seg, 20))
			}
		}
	}
	c.query = normEscapes(u.RawQuery, queryChars)
	return c, nil
}

// canonHost returns the host in its one form (and the address, when it
// is one). rawHost is as written (an IPv6 literal in brackets); host is it
// without brackets, percent-decoded.
func canonHost(rawHost, host string) (string, netip.Addr, error) {
	if strings.HasPrefix(rawHost, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", netip.Addr{}, usageURL("bad IPv6 address %q", cut(host, 60))
		}
		return a.String(), a, nil
	}
	h := strings.TrimSuffix(host, ".")
	if h == "" || slices.Contains(strings.Split(h, "."), "") {
		return "", netip.Addr{}, usageURL("%q is not a host name: an empty label", cut(host, 80))
	}
	if !utf8.ValidString(h) {
		return "", netip.Addr{}, usageURL("the host is not UTF-8")
	}
	ascii, err := idna.Lookup.ToASCII(h)
	if err == nil {
		// The form must be its own: what is checked is what is looked up.
		if again, err2 := idna.Lookup.ToASCII(ascii); err2 != nil || again != ascii {
			err = fmt.Errorf("it does not encode to one form")
		}
	}
	if err != nil {
		return "", netip.Addr{}, usageURL("%q is not a host name: %v", cut(h, 80), err)
	}
	ascii = strings.ToLower(ascii)
	if endsInNumber(ascii) {
		a, err := parseIPv4(ascii)
		if err != nil {
			return "", netip.Addr{}, usageURL("%q is not an IPv4 address: %v", cut(h, 80), err)
		}
		return a.String(), a, nil
	}
	return ascii, netip.Addr{}, nil
}

// endsInNumber is the WHATWG URL test for a host a browser reads as IPv4:
// its last label is digits, or 0x and hex digits.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	if x, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(x, "0123456789abcdef") == ""
	}
	return false
}

// parseIPv4 reads an IPv4 address as WHATWG (and inet_aton) do: one to
// four parts, each decimal, octal (leading 0) or hex (0x), the last one
// filling the bytes left.
func parseIPv4(h string) (netip.Addr, error) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, errors.New("more than four parts")
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			p, base = p[2:], 16
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil || p == "" {
			return netip.Addr{}, fmt.Errorf("part %q is not a number", parts[i])
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("part %q is over 255", parts[i])
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, fmt.Errorf("part %q is too large", parts[len(parts)-1])
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// Characters a path segment or a query may hold as they are, besides the
// unreserved ones (RFC 3986).
const (
	pathChars  = "!$&'()*+,;=:@/"
	queryChars = "!$&'()*+,;=:@/?"
)

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// normEscapes decodes escapes of unreserved characters, upper-cases the
// others, and escapes every byte that is neither unreserved nor in keep.
func normEscapes(s, keep string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if unreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(hex[v>>4])
				b.WriteByte(hex[v&15])
			}
			i += 2
			continue
		}
		if unreserved(c) || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// removeDotSegments resolves "." and ".." (RFC 3986, 5.2.4).
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	segs := strings.Split(p, "/")
	var out []string
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// underPrefix reports whether path is prefix or below it, on path-segment
// boundaries: /repos/ and /repos both cover /repos/x, neither covers
// /repository.
func underPrefix(path, prefix string) bool {
	if path == prefix || strings.HasSuffix(prefix, "/") && strings.HasPrefix(path, prefix) {
		return true
	}
	return strings.HasPrefix(path, prefix+"/")
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
