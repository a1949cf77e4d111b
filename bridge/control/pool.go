package control

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/gatebridge/gatebridge/sandbox"
)

// DefaultPoolIdle is PoolOptions.Idle when zero.
const DefaultPoolIdle = 10 * time.Minute

// PoolOptions configure the warm pool: long-lived sandboxes started ahead
// of the Open that takes them, with their agent up, for backends that
// are a sandbox.Starter (docker). A spec (backend asked for, image, OCI
// runtime, workspace and its mode; limits and user are the server's) is
// pooled once an Open asked for it; every Open of it then takes a
// started sandbox when one is there, and a replacement starts in the
// background. A sandbox a tenant had is never pooled again: its Close
// stops it.
type PoolOptions struct {
	// Size is how many started sandboxes are kept per spec (0: no pool).
	Size int
	// MaxTotal caps the pooled sandboxes of every spec together, started
	// or starting (0: Size).
	MaxTotal int
	// Idle is how long a pooled sandbox waits for an Open (0:
	// DefaultPoolIdle); then it is stopped, and its spec is not refilled
	// until it is asked for again.
	Idle time.Duration
}

// PoolStats is what the warm pool holds.
type PoolStats struct {
	Ready    int // started, waiting for an Open
	Starting int
	Taken    int // handed to an Open (since New)
	Started  int // started for the pool (since New)
	Expired  int // stopped unused after Idle (since New)
	Failed   int // starts that failed (since New)
	Stale    int // stopped at a take: the workspace directory was replaced (since New)
}

// poolKey is what makes two sandboxes interchangeable before a tenant
// has one.
type poolKey struct {
	backend, image, runtime, workspace string
	writable                           bool
}

// pool is the warm pool of a Host; a nil *pool pools nothing.
type pool struct {
	h      *Host
	o      PoolOptions
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}
	// stopping counts the stale sandboxes being stopped off a take's
	// path (close waits for them).
	stopping sync.WaitGroup

	mu     sync.Mutex
	closed bool
	specs  map[poolKey]*poolSpec
	order  []poolKey // specs in the order they were first asked for
	total  int       // ready and starting, every spec
	stats  PoolStats
}

// poolSpec is one spec's part of the pool.
type poolSpec struct {
	settings sandbox.Settings
	wanted   bool // refilled: asked for, and not expired or failed since
	ready    []*pooled
	starting int
}

type pooled struct {
	st *started
	at time.Time // when it became ready
	// ws is the workspace directory as it was before the start, kept
	// open while pooled (so that its inode number is not reused): a
	// directory replaced at the same path since then is not the one the
	// sandbox mounted, and such a sandbox is not handed out.
	ws os.FileInfo
}

func newPool(h *Host, o PoolOptions) *pool {
	if o.Size <= 0 {
		return nil
	}
	if o.MaxTotal <= 0 {
		o.MaxTotal = o.Size
	}
	if o.Idle <= 0 {
		o.Idle = DefaultPoolIdle
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{h: h, o: o, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), done: make(chan struct{}),
		specs: map[poolKey]*poolSpec{}}
	go p.loop()
	return p
}

// want marks key's spec as asked for: the pool fills it.
func (p *pool) want(key poolKey, settings sandbox.Settings) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.spec(key, settings).wanted = true
	}
	p.mu.Unlock()
	p.wake()
}

// take hands out a started sandbox of key's spec (nil: none ready, or no
// pool), and starts its replacement. One whose workspace directory is
// no longer the one at key.workspace is stopped instead.
func (p *pool) take(key poolKey) *started {
	if p == nil {
		return nil
	}
	ws, err := os.Stat(key.workspace)
	var stale []*started
	defer func() {
		if len(stale) > 0 {
			p.stopping.Add(1)
			go func() { defer p.stopping.Done(); stopAll(stale) }()
		}
	}()
	p.mu.Lock()
	defer p.wake()
	defer p.mu.Unlock()
	s := p.specs[key]
	if p.closed || s == nil {
		return nil
	}
	s.wanted = true
	for len(s.ready) > 0 {
		pd := s.ready[0] // the oldest: Idle measures how long none was taken
		s.ready = s.ready[1:]
		p.total--
		if err != nil || !os.SameFile(ws, pd.ws) {
			stale = append(stale, pd.st)
			p.stats.Stale++
			continue
		}
		p.stats.Taken++
		return pd.st
	}
	return nil
}

// spec is key's spec, made when new (p.mu held).
func (p *pool) spec(key poolKey, settings sandbox.Settings) *poolSpec {
	s := p.specs[key]
	if s == nil {
		s = &poolSpec{settings: settings}
		p.specs[key] = s
		p.order = append(p.order, key)
	}
	return s
}

func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// loop starts what the pool lacks, one sandbox at a time (a start is
// mostly the engine's work: several at once only share its CPUs), and
// stops the ones idle too long.
func (p *pool) loop() {
	defer close(p.done)
	timer := time.NewTimer(p.o.Idle)
	defer timer.Stop()
	for {
		p.expire()
		if key, s := p.next(); s != nil {
			wsf, ws, err := openDir(key.workspace) // before the start: see pooled.ws
			var st *started
			if err == nil {
				st, err = p.h.start(p.ctx, key, s.settings, "pool")
				if err != nil {
					wsf.Close()
				} else {
					st.closers = append([]func(){func() { wsf.Close() }}, st.closers...)
				}
			}
			if err == nil {
				err = warm(p.ctx, st)
			}
			p.mu.Lock()
			s.starting--
			switch {
			case err != nil:
				p.total--
				p.stats.Failed++
				s.wanted = false // until it is asked for again: no start loop on a broken spec
			case p.closed:
				p.total--
			default:
				s.ready = append(s.ready, &pooled{st: st, at: time.Now(), ws: ws})
				p.stats.Started++
				st = nil
			}
			p.mu.Unlock()
			if err != nil {
				if p.ctx.Err() == nil {
					p.h.opts.Logf("gatebridge: pool: start a sandbox (image %s): %v", s.settings.Image, err)
				}
			} else if st != nil {
				st.release()
			}
			continue
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(p.nextExpiry())
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-timer.C:
		}
	}
}

// openDir opens dir (held open while its sandbox is pooled) and stats it.
func openDir(dir string) (*os.File, os.FileInfo, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// warm readies st's long-lived sandbox for its first command (its agent
// dialled).
func warm(ctx context.Context, st *started) error {
	if w, ok := st.persistent.(sandbox.Warmer); ok {
		if err := w.Warm(ctx); err != nil {
			st.release()
			return err
		}
	}
	return nil
}

// next picks the spec to start one more sandbox for, and counts it as
// starting (nil: none).
func (p *pool) next() (poolKey, *poolSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.total >= p.o.MaxTotal {
		return poolKey{}, nil
	}
	// The spec that has fewest first, so that several share MaxTotal.
	var best *poolSpec
	var bestKey poolKey
	for _, k := range p.order {
		s := p.specs[k]
		n := len(s.ready) + s.starting
		if s.wanted && n < p.o.Size && (best == nil || n < len(best.ready)+best.starting) {
			best, bestKey = s, k
		}
	}
	if best != nil {
		best.starting++
		p.total++
	}
	return bestKey, best
}

// expire stops the sandboxes that waited Idle; their spec is refilled
// only once asked for again.
func (p *pool) expire() {
	var old []*started
	p.mu.Lock()
	now := time.Now()
	for _, s := range p.specs {
		for len(s.ready) > 0 && now.Sub(s.ready[0].at) >= p.o.Idle {
			old = append(old, s.ready[0].st)
			s.ready = s.ready[1:]
			s.wanted = false
			p.total--
			p.stats.Expired++
		}
	}
	p.mu.Unlock()
	stopAll(old)
}

// nextExpiry is how long until the oldest ready sandbox expires.
func (p *pool) nextExpiry() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.o.Idle
	now := time.Now()
	for _, s := range p.specs {
		if len(s.ready) > 0 {
			d = min(d, p.o.Idle-now.Sub(s.ready[0].at))
		}
	}
	return max(d, time.Millisecond)
}

// close stops every pooled sandbox, and a start under way.
func (p *pool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	var all []*started
	p.mu.Lock()
	for _, s := range p.specs {
		for _, pd := range s.ready {
			all = append(all, pd.st)
		}
		p.total -= len(s.ready)
		s.ready = nil
	}
	p.mu.Unlock()
	stopAll(all)
	p.stopping.Wait()
}

// stopAll releases sts at once (a container's removal is mostly waiting).
func stopAll(sts []*started) {
	var wg sync.WaitGroup
	for _, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.release()
		}()
	}
	wg.Wait()
}

// PoolStats says what the warm pool holds (zero without a pool).
func (h *Host) PoolStats() PoolStats {
	p := h.pool
	if p == nil {
		return PoolStats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	for _, s := range p.specs {
		st.Ready += len(s.ready)
		st.Starting += s.starting
	}
	return st
}

// Close stops the warm pool's sandboxes (an open Sandbox is its
// tenant's to close). A Host without a pool needs no Close.
func (h *Host) Close() { h.pool.close() }
