package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sandboxes gives each MCP session of `mcp --http` its own host (an
// in-process connection and its sandbox), opened at the session's first
// tool call:
//
//   - at most max are open at once (being opened and being closed count
//     too); a session past it gets a tool error naming
//     mcp.sessions.max_sandboxes;
//   - a host with no tool call for idle is closed and its slot freed; the
//     session's next call opens a new one that goes on with its process
//     ids (an old one is then said to be gone);
//   - a host is opened outside the lock, by one goroutine per session
//     (calls of the same session wait for that open, each on its own
//     context), so a slow sandbox start holds up no other session;
//   - every host is closed when its session ends, and by close.
type sandboxes struct {
	open func(context.Context) (*host, error)
	max  int
	idle time.Duration
	logf func(format string, args ...any)

	ctx    context.Context // cancelled by close: opens in progress stop
	cancel context.CancelFunc

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*sessionState
	live     int  // slots taken: hosts being opened, open, or being closed
	closing  bool // close was called
	refused  bool // a refusal was logged since a slot last freed
	wg       sync.WaitGroup
}

// sessionState is what the pool knows of a session that made a tool
// call.
type sessionState struct {
	slot *sessionSlot // nil: no host (none yet, or closed idle)
	// Of the last host closed idle: its last process id, and a note.
	lastID int
	gone   string
}

// sessionSlot is one session's host: being opened until ready is closed.
type sessionSlot struct {
	ready   chan struct{}
	h       *host // set when ready; nil if the open failed
	err     error
	calls   int       // tool calls using it
	last    time.Time // when calls last fell to 0
	timer   *time.Timer
	removed bool // taken from its session: whoever took it closes it and frees the slot
}

// newSandboxes is a pool of at most max hosts made by open, each closed
// after idle without a call (0s: the mcp.sessions defaults).
func newSandboxes(ctx context.Context, open func(context.Context) (*host, error), max int, idle time.Duration, logf func(string, ...any)) *sandboxes {
	p := &sandboxes{open: open, max: cmp.Or(max, DefaultMaxSandboxes), idle: cmp.Or(idle, DefaultIdleTimeout),
		logf: logf, sessions: map[*mcp.ServerSession]*sessionState{}}
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return p
}

var errStopping = errors.New("the server is stopping")

// resolve is an [resolver]: the host of ss, opened at its first call.
func (p *sandboxes) resolve(ctx context.Context, ss *mcp.ServerSession) (*host, func(), error) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil, nil, errStopping
	}
	st := p.sessions[ss]
	var s *sessionSlot
	if st != nil {
		s = st.slot
	}
	if s == nil {
		if p.live >= p.max { // refused before any state is kept for ss
			if !p.refused {
				p.refused = true
				p.logf("refused a session a sandbox: %d are open, the most mcp.sessions.max_sandboxes allows", p.live)
			}
			p.mu.Unlock()
			return nil, nil, fmt.Errorf("no sandbox for this session: %d are open, the most this server allows (mcp.sessions.max_sandboxes); try again when another session ends or has been idle for %v (mcp.sessions.idle_timeout)", p.max, p.idle)
		}
		if st == nil {
			st = &sessionState{}
			p.sessions[ss] = st
			p.wg.Add(1)
			go p.watch(ss)
		}
		s = &sessionSlot{ready: make(chan struct{})}
		st.slot = s
		p.live++
		p.wg.Add(1)
		go p.openSlot(st, s, st.lastID, st.gone)
	}
	s.calls++
	if s.timer != nil {
		s.timer.Stop()
	}
	p.mu.Unlock()
	done := func() { p.release(st, s) }
	select {
	case <-s.ready:
	case <-ctx.Done():
		done()
		return nil, nil, ctx.Err()
	}
	if s.err != nil {
		done()
		return nil, nil, s.err
	}
	return s.h, done, nil
}

// openSlot opens s's host (outside the lock), then makes it ready.
func (p *sandboxes) openSlot(st *sessionState, s *sessionSlot, lastID int, gone string) {
	defer p.wg.Done()
	h, err := p.open(p.ctx)
	if err == nil && lastID > 0 {
		h.follow(lastID, gone)
	}
	if err != nil {
		err = fmt.Errorf("open this session's sandbox: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.h, s.err = h, err
	close(s.ready)
	switch {
	case s.removed:
		// Its session ended, or the server is stopping: the taker closes it.
	case err != nil:
		s.removed = true
		st.slot = nil
		p.freeLocked()
	case s.calls == 0:
		p.armLocked(st, s) // every caller gave up waiting
	}
}

// release ends one tool call's use of s; the last one arms the idle timer.
func (p *sandboxes) release(st *sessionState, s *sessionSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.calls--
	if s.calls == 0 && !s.removed && s.h != nil {
		p.armLocked(st, s)
	}
}

// armLocked starts s's idle timer.
func (p *sandboxes) armLocked(st *sessionState, s *sessionSlot) {
	s.last = time.Now()
	if s.timer == nil {
		s.timer = time.AfterFunc(p.idle, func() { p.expire(st, s) })
	} else {
		s.timer.Reset(p.idle)
	}
}

// expire closes s's host if it has stayed idle; the session's next call
// opens a new one.
func (p *sandboxes) expire(st *sessionState, s *sessionSlot) {
	p.mu.Lock()
	if s.removed || st.slot != s || s.calls > 0 || time.Since(s.last) < p.idle {
		p.mu.Unlock()
		return
	}
	s.removed = true
	st.slot = nil
	st.lastID = s.h.lastID()
	st.gone = fmt.Sprintf("it ran in this session's sandbox, which was closed after %v without a call (mcp.sessions.idle_timeout): it was stopped and its output dropped", p.idle)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	p.closeSlot(s)
}

// closeSlot closes the host of s, taken from its session, once it is
// ready, then frees its slot.
func (p *sandboxes) closeSlot(s *sessionSlot) {
	<-s.ready
	if s.h != nil {
		s.h.close()
	}
	p.mu.Lock()
	p.freeLocked()
	p.mu.Unlock()
}

func (p *sandboxes) freeLocked() {
	p.live--
	p.refused = false
}

// watch closes ss's host when ss ends.
func (p *sandboxes) watch(ss *mcp.ServerSession) {
	defer p.wg.Done()
	ss.Wait()
	p.mu.Lock()
	st := p.sessions[ss]
	delete(p.sessions, ss)
	var s *sessionSlot
	if st != nil && st.slot != nil {
		s = st.slot
		s.removed = true
		st.slot = nil
		if s.timer != nil {
			s.timer.Stop()
		}
	}
	p.mu.Unlock()
	if s != nil {
		p.closeSlot(s)
	}
}

// close ends every session that has a host (which closes the host) and
// waits until all are closed; later calls are refused.
func (p *sandboxes) close() {
	p.mu.Lock()
	p.closing = true
	var all []*mcp.ServerSession
	for ss := range p.sessions {
		all = append(all, ss)
	}
	p.mu.Unlock()
	p.cancel()
	for _, ss := range all {
		ss.Close()
	}
	p.wg.Wait()
}
