package httpgate

import (
	"net/netip"
	"testing"
)

// The canonical form is what the policy checks and what is sent: each
// row is a way to write a URL that a naive prefix check would read
// otherwise than the server does.
func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://API.GitHub.com/repos/x", "https://api.github.com/repos/x"},
		{"https://api.github.com:443/repos/x", "https://api.github.com/repos/x"},
		{"http://api.github.com:80", "http://api.github.com/"},
		{"http://h:0080/x", "http://h/x"},
		{"https://api.github.com./repos/", "https://api.github.com/repos/"},
		{"https://bücher.example/ä", "https://xn--bcher-kva.example/%C3%A4"},
		{"https://ＡＰＩ.github.com/", "https://api.github.com/"},
		{"https://api.github.com/repos/../admin", "https://api.github.com/admin"},
		{"https://api.github.com/repos/./x/.", "https://api.github.com/repos/x/"},
		{"https://api.github.com/repos/%2e%2e/admin", "https://api.github.com/admin"},
		{"https://api.github.com/repos/.%2E/admin", "https://api.github.com/admin"},
		{"https://api.github.com/%7euser/%41%2f%2a", "https://api.github.com/~user/A%2F%2A"},
		{"https://api.github.com/a b", "https://api.github.com/a%20b"},
		{"https://h/p?q=a b&x=%7e#frag", "https://h/p?q=a%20b&x=~"},
		{"http://2130706433/", "http://127.0.0.1/"},
		{"http://0x7f.1/", "http://127.0.0.1/"},
		{"http://0177.0.0.1/", "http://127.0.0.1/"},
		{"http://127.1/", "http://127.0.0.1/"},
		{"http://１２７.０.０.１/", "http://127.0.0.1/"},
		{"http://[::ffff:169.254.169.254]/", "http://[::ffff:169.254.169.254]/"},
		{"http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/"},
	} {
		u, err := parseURL(tc.in)
		if err != nil || u.String() != tc.want {
			t.Errorf("parseURL(%q) = %q, %v; want %q", tc.in, u.String(), err, tc.want)
		}
	}
	for _, tc := range []struct {
		in     string
		denied bool
	}{
		{"file:///etc/passwd", true},
		{"gopher://h/", true},
		{"https://user:pw@api.github.com/", true},
		{"https://api.github.com@evil.example/", true},
		{"https://h/repos/x%2F..%2F..%2Fadmin", true},
		{"https://h/repos/x%5C..%5Cadmin", true},
		{"https://h/a\r\nHost: evil", true},
		{"api.github.com/repos/", false},
		{"/repos/", false},
		{"http:opaque", false},
		{"http://1.2.3.4.5/", false},
		{"http://256.1.1.1/", false},
		{"http://h:99999/", false},
		{"http://[fe80::1%25eth0]/", false},
		{"http://exa_mple.com/", false},
		{"http://%31%32%37.0.0.1/", false}, // Go's parser refuses escapes in a host
	} {
		_, err := parseURL(tc.in)
		ue, ok := err.(*urlError)
		if !ok || ue.denied != tc.denied {
			t.Errorf("parseURL(%q): %v (denied %v), want refused, denied=%v", tc.in, err, ok && ue.denied, tc.denied)
		}
	}
}

func TestUnderPrefix(t *testing.T) {
	for _, tc := range []struct {
		path, prefix string
		want         bool
	}{
		{"/repos/x", "/repos/", true},
		{"/repos/", "/repos/", true},
		{"/repos", "/repos/", false},
		{"/repository", "/repos/", false},
		{"/repos/x", "/repos", true},
		{"/repos", "/repos", true},
		{"/reposx", "/repos", false},
		{"/anything", "/", true},
	} {
		if got := underPrefix(tc.path, tc.prefix); got != tc.want {
			t.Errorf("underPrefix(%q, %q) = %v", tc.path, tc.prefix, got)
		}
	}
}

// Every way to write a non-public address is refused without
// allow_private; metadata endpoints even with it.
func TestAddrRefusal(t *testing.T) {
	for _, a := range []string{
		"127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "::", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1",
		"169.254.1.1", "169.254.169.254", "fd00:ec2::254", "fe80::1", "fc00::1", "224.0.0.1", "ff02::1",
		"255.255.255.255", "240.0.0.1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2001::1", "198.18.0.1", "fec0::1",
	} {
		if why := addrRefusal(netip.MustParseAddr(a), false, netip.Addr{}); why == "" {
			t.Errorf("%s is allowed", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "140.82.112.6", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"} {
		if why := addrRefusal(netip.MustParseAddr(a), false, netip.Addr{}); why != "" {
			t.Errorf("%s is refused: %s", a, why)
		}
	}
	for _, a := range []string{"169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"} {
		if addrRefusal(netip.MustParseAddr(a), true, netip.Addr{}) == "" {
			t.Errorf("metadata %s allowed with allow_private", a)
		}
	}
	if addrRefusal(netip.MustParseAddr("127.0.0.1"), true, netip.Addr{}) != "" {
		t.Error("loopback refused with allow_private")
	}
	if addrRefusal(netip.MustParseAddr("169.254.169.254"), true, netip.MustParseAddr("169.254.169.254")) != "" {
		t.Error("a rule naming the metadata address itself is refused it")
	}
}

// The canonical form is a fixed point, and never holds what the policy
// refuses: parsing it again gives it back.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"https://API.github.com/repos/../x?q=%7e", "http://2130706433/", "http://[::ffff:1.2.3.4]:80/a/./b",
		"https://bücher.example/%2e%2E/", "http://0x7f.1/%2F", "https://h/a%5C..", "http://h:0443/?a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := parseURL(raw)
		if err != nil {
			return
		}
		if u.scheme != "http" && u.scheme != "https" || u.path == "" || u.path[0] != '/' {
			t.Fatalf("%q: canonical %q", raw, u)
		}
		again, err := parseURL(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("%q: canonical %q parses to %q, %v", raw, u, again, err)
		}
	})
}
