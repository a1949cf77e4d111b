package bridge

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/gatebridge/gatebridge/bridge/mailbox"
)

// hub is the process-wide fsnotify watcher shared by all sessions: one
// inotify instance per process, not per session (max_user_instances is
// small). It routes events by directory to the owning session and tells
// every session to rescan when events may have been lost.
type hub struct {
	mu       sync.Mutex
	w        *fsnotify.Watcher
	refs     int
	sessions map[string]*server   // calls dir → its server
	calls    map[string]callWatch // /proc/self/fd/N of a call dir → its call
	done     chan struct{}
	closing  sync.WaitGroup // watchers being closed in the background
}

var theHub hub

type watchEvent struct {
	id    string // call id (directory name under calls/)
	inner string // base name of the entry inside the call dir; "" for calls/ itself
}

// register starts watching s.callsPath. On error the session must poll.
func (h *hub) register(s *server) error {
	h.mu.Lock()
	if h.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			h.mu.Unlock()
			return err
		}
		h.w = w
		h.sessions = map[string]*server{}
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

func (h *hub) unregister(s *server) {
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
	h.w, h.sessions, h.done, h.calls = nil, nil, nil, nil
	h.mu.Unlock()
	// Closing an inotify fd can block for tens of milliseconds while the
	// kernel waits for a grace period; a CLI run would pay that at every
	// exit. Close in the background: the old watcher's events can only make
	// a session look again, which is always safe.
	h.closing.Add(1)
	go func() {
		defer h.closing.Done()
		w.Close()
		<-done
	}()
}

// callWatch is a watched call directory: which session and id it is.
type callWatch struct {
	s  *server
	id string
}

// procFD reports whether /proc/self/fd can name open directories.
var procFD = func() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}()

// addCallDir watches the call directory open as dirFd so its ready marker
// raises an event. Where /proc/self/fd exists (Linux) it watches
// /proc/self/fd/N of a dup of dirFd rather than the path: inotify_add_watch
// follows symlinks, and the sandbox could swap calls/<id> for a link between
// our O_NOFOLLOW open and the watch; the fd names exactly the directory we
// opened. Elsewhere (kqueue: macOS, BSD) it watches the path after checking
// that it is still the directory we opened; a link swapped in after that
// check can only make us watch another directory, whose events merely make
// the server look at this call again (it reopens without following links).
// It returns a dup of dirFd (owned by the caller until removeCallDir) and
// the watch path; fd -1 when nothing is watched (the rescan finds the
// ready marker).
func (h *hub) addCallDir(s *server, id string, dirFd int) (int, string) {
	fd, err := unix.Dup(dirFd)
	if err != nil {
		return -1, ""
	}
	unix.CloseOnExec(fd)
	path := "/proc/self/fd/" + strconv.Itoa(fd)
	if !procFD {
		path = filepath.Join(s.callsPath, id)
		var opened, now unix.Stat_t
		if unix.Fstat(fd, &opened) != nil || unix.Lstat(path, &now) != nil ||
			opened.Dev != now.Dev || opened.Ino != now.Ino {
			unix.Close(fd)
			return -1, ""
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		unix.Close(fd)
		return -1, ""
	}
	if err := h.w.Add(path); err != nil {
		unix.Close(fd)
		return -1, ""
	}
	if h.calls == nil {
		h.calls = map[string]callWatch{}
	}
	h.calls[path] = callWatch{s, id}
	return fd, path
}

// removeCallDir stops watching and closes the fd from addCallDir.
func (h *hub) removeCallDir(fd int, path string) {
	if fd < 0 {
		return
	}
	h.mu.Lock()
	if h.w != nil {
		h.w.Remove(path)
	}
	delete(h.calls, path)
	h.mu.Unlock()
	unix.Close(fd)
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
		// Remove too: a watched call dir removed before ready must be
		// looked at again so its watch slot and fd are released.
		if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Remove) {
			h.mu.Unlock()
			return
		}
		e = watchEvent{id: base}
	} else {
		cw, ok := h.calls[dir]
		if !ok || base != mailbox.FileReady {
			h.mu.Unlock()
			return
		}
		s = cw.s
		e = watchEvent{id: cw.id, inner: base}
	}
	h.mu.Unlock()
	s.notify(e)
}
