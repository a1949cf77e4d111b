package bridge

import (
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// hub is the process-wide fsnotify watcher shared by all sessions: one
// inotify instance per process, not per session (max_user_instances is
// small). It routes events by directory to the owning session and tells
// every session to rescan when events may have been lost.
type hub struct {
	mu       sync.Mutex
	w        *fsnotify.Watcher
	refs     int
	sessions map[string]*Session // calls dir → session
	done     chan struct{}
}

var theHub hub

type watchEvent struct {
	id    string // call id (directory name under calls/)
	inner string // base name of the entry inside the call dir; "" for calls/ itself
}

// register starts watching s.callsPath. On error the session must poll.
func (h *hub) register(s *Session) error {
	h.mu.Lock()
	if h.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			h.mu.Unlock()
			return err
		}
		h.w = w
		h.sessions = map[string]*Session{}
		h.done = make(chan struct{})
		go h.loop(w, h.done)
	}
	h.sessions[s.callsPath] = s
	if err := h.w.Add(s.callsPath); err != nil {
		delete(h.sessions, s.callsPath)
		h.releaseLocked()
		return err
	}
	h.refs++
	h.mu.Unlock()
	return nil
}

func (h *hub) unregister(s *Session) {
	h.mu.Lock()
	if _, ok := h.sessions[s.callsPath]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.sessions, s.callsPath)
	h.w.Remove(s.callsPath)
	h.refs--
	h.releaseLocked()
}

// releaseLocked closes the watcher when no session uses it, and unlocks
// h.mu (the event loop needs the lock to finish).
func (h *hub) releaseLocked() {
	if h.refs > 0 || h.w == nil {
		h.mu.Unlock()
		return
	}
	w, done := h.w, h.done
	h.w, h.sessions, h.done = nil, nil, nil
	h.mu.Unlock()
	w.Close()
	<-done
}

// addCallDir watches one call directory so its ready marker raises an event.
func (h *hub) addCallDir(path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return errHubClosed
	}
	return h.w.Add(path)
}

func (h *hub) removeCallDir(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		h.w.Remove(path)
	}
}

func (h *hub) loop(w *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			h.route(ev)
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			// Overflow or any other error: events may be lost, rescan all.
			h.mu.Lock()
			for _, s := range h.sessions {
				s.notifyRescan()
			}
			h.mu.Unlock()
		}
	}
}

func (h *hub) route(ev fsnotify.Event) {
	dir, base := filepath.Split(ev.Name)
	dir = filepath.Clean(dir)
	h.mu.Lock()
	s := h.sessions[dir]
	var e watchEvent
	if s != nil {
		if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Rename) {
			h.mu.Unlock()
			return
		}
		e = watchEvent{id: base}
	} else {
		parent, id := filepath.Split(dir)
		s = h.sessions[filepath.Clean(parent)]
		if s == nil || base != "ready" {
			h.mu.Unlock()
			return
		}
		e = watchEvent{id: id, inner: base}
	}
	h.mu.Unlock()
	s.notify(e)
}
