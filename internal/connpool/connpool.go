// Package connpool bounds the connections a network server has accepted
// that have not authenticated yet (serve --listen's handshakes, mcp
// --http's requests before one shows the token): at most Max at once,
// PerSource of one source (this host is one source), and when a cap is
// reached the new connection is kept and an older pending one is closed,
// the oldest idle one first. A client without the token cannot hold the
// server's file descriptors, and one that authenticates gets in while a
// flood goes on.
package connpool

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Defaults of New's caps left zero.
const (
	DefaultMax          = 128
	DefaultMaxPerSource = 32
)

// A Conn is a connection in a Pool.
type Conn struct {
	NC net.Conn
	// Source is where it comes from, for the per-source cap: "local" for
	// this host, else the remote IP address (IPv6 by its /64).
	Source  string
	seq     uint64    // order of arrival
	at      time.Time // accepted
	evicted bool      // closed to make room (under Pool.mu)
	// evict, if set, ends the connection when it is evicted; else its
	// deadline is set to now, for its goroutine to tell it why.
	evict func()
}

// NewConn is nc, just accepted, for a pool; evict (nil: set nc's deadline
// to now) ends it at once when it is closed to make room.
func NewConn(nc net.Conn, evict func()) *Conn {
	return &Conn{NC: nc, Source: sourceOf(nc), at: time.Now(), evict: evict}
}

// Pool holds the connections that have not authenticated yet, by source.
// Its methods are safe for concurrent use.
type Pool struct {
	mu        sync.Mutex
	max       int
	perSource int
	bySource  map[string][]*Conn // oldest first
	n         int
	seq       uint64
}

// New returns a pool of at most max pending connections, perSource of
// one source (0: DefaultMax, DefaultMaxPerSource).
func New(max, perSource int) *Pool {
	if max <= 0 {
		max = DefaultMax
	}
	if perSource <= 0 {
		perSource = min(DefaultMaxPerSource, max)
	}
	return &Pool{max: max, perSource: perSource, bySource: map[string][]*Conn{}}
}

// Add adds c, first evicting a pending connection if a cap is reached:
// one of c's source if that source is at its cap, else, if the pool is
// full, one of the source with the most pending (the one whose oldest
// came first, on a tie).
func (p *Pool) Add(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bySource[c.Source]) >= p.perSource {
		p.evict(c.Source)
	} else if p.n >= p.max {
		var src string
		for s, list := range p.bySource {
			if cur := p.bySource[src]; src == "" || len(list) > len(cur) || len(list) == len(cur) && list[0].seq < cur[0].seq {
				src = s
			}
		}
		p.evict(src)
	}
	p.seq++
	c.seq = p.seq
	p.bySource[c.Source] = append(p.bySource[c.Source], c)
	p.n++
}

// idleAfter is how long a connection may have sent nothing before it is
// taken for idle: a client sends its first bytes (its line, or its TLS
// ClientHello) with the ACK that completes the connection.
var idleAfter = 100 * time.Millisecond

// SetIdleAfter sets idleAfter (for tests); the returned function
// restores it.
func SetIdleAfter(d time.Duration) (restore func()) {
	old := idleAfter
	idleAfter = d
	return func() { idleAfter = old }
}

// evict closes a pending connection of source (its goroutine sees the
// deadline, then that it was evicted): the oldest of those idle (nothing
// sent for idleAfter); else the oldest of those with nothing unread in
// the kernel; else the oldest. A client whose line has come is about to
// authenticate; one that sent bytes, all read, is in its TLS handshake or
// sends its line in pieces.
func (p *Pool) evict(source string) {
	list := p.bySource[source]
	i, quiet := -1, -1
	for j, c := range list {
		received, unread, ok := progress(c.NC)
		if !ok {
			break
		}
		if !received && time.Since(c.at) >= idleAfter {
			i = j
			break
		}
		if unread == 0 && quiet < 0 {
			quiet = j
		}
	}
	if i < 0 {
		i = max(quiet, 0)
	}
	c := list[i]
	c.evicted = true
	if c.evict != nil {
		c.evict()
	} else {
		c.NC.SetDeadline(time.Now())
	}
	p.drop(source, i)
}

// Remove takes c out of the pool (it authenticated, or it is closed); it
// reports false if c was evicted (closed to make room) before.
func (p *Pool) Remove(c *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.evicted {
		return false
	}
	for i, o := range p.bySource[c.Source] {
		if o == c {
			p.drop(c.Source, i)
			break
		}
	}
	return true
}

func (p *Pool) drop(source string, i int) {
	list := slices.Delete(p.bySource[source], i, i+1)
	if len(list) == 0 {
		delete(p.bySource, source)
	} else {
		p.bySource[source] = list
	}
	p.n--
}

// sourceOf names where a connection comes from, for the per-source cap:
// "local" for this host (a loopback address, or this host's own address
// on both ends), else the remote IP address (an IPv6 address by its /64,
// which one host often holds whole).
func sourceOf(nc net.Conn) string {
	remote, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nc.RemoteAddr().String()
	}
	ip, _ := netip.AddrFromSlice(remote.IP)
	ip = ip.Unmap()
	if local, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		lip, _ := netip.AddrFromSlice(local.IP)
		if lip.Unmap() == ip || lip.IsLoopback() {
			return "local"
		}
	}
	switch {
	case ip.IsLoopback():
		return "local"
	case ip.Is6():
		pfx, _ := ip.Prefix(64)
		return pfx.String()
	}
	return ip.String()
}
