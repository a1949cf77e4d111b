package httpgate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Metadata endpoints of cloud providers: refused even with allow_private,
// unless the rule names the address itself.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, …
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba
}

// Address blocks refused without allow_private, beyond what netip's
// predicates name: what is not one host on the Internet.
var specialPrefixes = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (or broadcast)"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Blocks that carry an IPv4 address, which is checked in turn.
var (
	nat64   = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixTo4  = netip.MustParsePrefix("2002::/16")
	errRefd = errors.New("refused address")
)

// addrRefusal says why a connects to a is refused under a rule ("" when
// it is not). allowPrivate lets every address through but the metadata
// endpoints; ruleIP, the address a rule names itself (if it names one),
// lets that one through too.
func addrRefusal(a netip.Addr, allowPrivate bool, ruleIP netip.Addr) string {
	a = a.WithZone("")
	if ruleIP.IsValid() && a == ruleIP {
		return ""
	}
	u := a.Unmap()
	for _, m := range metadataAddrs {
		if u == m {
			return "a cloud metadata endpoint"
		}
	}
	if allowPrivate {
		return ""
	}
	switch {
	case u.IsUnspecified():
		return "unspecified"
	case u.IsLoopback():
		return "loopback"
	case u.IsPrivate():
		return "private"
	case u.IsLinkLocalUnicast():
		return "link-local"
	case u.IsMulticast(), u.IsLinkLocalMulticast(), u.IsInterfaceLocalMulticast():
		return "multicast"
	}
	if u == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "broadcast"
	}
	for _, s := range specialPrefixes {
		if s.p.Contains(u) {
			return s.why
		}
	}
	if u.Is6() {
		b := u.As16()
		for _, p := range nat64 {
			if p.Contains(u) {
				if why := addrRefusal(netip.AddrFrom4([4]byte(b[12:16])), false, netip.Addr{}); why != "" {
					return "NAT64 of a " + why + " IPv4 address"
				}
			}
		}
		if sixTo4.Contains(u) {
			if why := addrRefusal(netip.AddrFrom4([4]byte(b[2:6])), false, netip.Addr{}); why != "" {
				return "6to4 of a " + why + " IPv4 address"
			}
		}
	}
	return ""
}

// refusedError is a connection the address policy refused: exit 126.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return errRefd }

// lookupError is a host that did not resolve: exit 6, as curl's.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }
func (e *lookupError) Unwrap() error { return e.err }

// connectError is a connection that failed: exit 7, as curl's.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// dialer resolves a rule's host once, checks every address it got, and
// connects to the checked addresses only: no second lookup can answer
// with another one (DNS rebinding).
type dialer struct {
	allowPrivate bool
	ruleIP       netip.Addr
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if addrs, err = d.lookup(ctx, host); err != nil {
			return nil, &lookupError{fmt.Errorf("cannot resolve %s: %w", host, err)}
		}
		if len(addrs) == 0 {
			return nil, &lookupError{fmt.Errorf("cannot resolve %s: no address", host)}
		}
	}
	for _, a := range addrs {
		if why := addrRefusal(a, d.allowPrivate, d.ruleIP); why != "" {
			msg := fmt.Sprintf("%s resolves to %s, a %s address: refused", host, a, why)
			if a.String() == host {
				msg = fmt.Sprintf("%s is a %s address: refused", host, why)
			}
			if why != "a cloud metadata endpoint" {
				msg += " (a rule with allow_private: true allows it)"
			}
			return nil, &refusedError{msg}
		}
	}
	var nd net.Dialer
	nd.Timeout = 30 * time.Second
	var last error
	for _, a := range addrs {
		c, err := nd.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, &connectError{fmt.Errorf("cannot connect to %s: %w", addr, last)}
}

// systemLookup resolves with Go's resolver (no proxy, no second lookup:
// its answer is what dial connects to).
func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
