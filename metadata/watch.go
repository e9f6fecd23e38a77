package metadata

import "sync"

// WatchQueueSize bounds the events a watcher buffers for a slow consumer.
// A watcher that would need more is closed with ErrWatchOverflow instead of
// dropping events silently: its owner re-reads and watches again.
const WatchQueueSize = 4096

// Watcher delivers events for one watch. Read Events until it is closed,
// then check Err: nil after Close, ErrWatchOverflow, ErrSessionLost or
// ErrClosed otherwise.
type Watcher struct {
	events chan Event
	prefix string
	stop   func(*Watcher) // detaches from the backend

	mu     sync.Mutex
	err    error
	closed bool
}

func newWatcher(prefix string, stop func(*Watcher)) *Watcher {
	return &Watcher{events: make(chan Event, WatchQueueSize), prefix: prefix, stop: stop}
}

// Events is the ordered stream of events; it is closed when the watch ends.
func (w *Watcher) Events() <-chan Event { return w.events }

// Err says why the watch ended (nil while open or after Close).
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close ends the watch.
func (w *Watcher) Close() {
	w.stop(w)
	w.end(nil)
}

// deliver queues ev without blocking; a full queue ends the watch with
// ErrWatchOverflow. It reports whether the watcher is still open. Backends
// call it under their own lock, which keeps events in order.
func (w *Watcher) deliver(ev Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	select {
	case w.events <- ev:
		return true
	default:
		w.closeLocked(ErrWatchOverflow)
		return false
	}
}

func (w *Watcher) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeLocked(err)
}

func (w *Watcher) closeLocked(err error) {
	if w.closed {
		return
	}
	w.closed, w.err = true, err
	close(w.events)
}

// SessionWatcher delivers session state changes in order. Like Watcher it
// is bounded and closes with ErrWatchOverflow rather than drop a state.
type SessionWatcher struct {
	states chan SessionState
	mu     sync.Mutex
	err    error
	closed bool
}

func newSessionWatcher() *SessionWatcher {
	return &SessionWatcher{states: make(chan SessionState, 64)}
}

// States is the ordered stream of session states.
func (s *SessionWatcher) States() <-chan SessionState { return s.states }

// Err says why the stream ended.
func (s *SessionWatcher) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *SessionWatcher) deliver(st SessionState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.states <- st:
	default:
		s.closed, s.err = true, ErrWatchOverflow
		close(s.states)
	}
}

func (s *SessionWatcher) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed, s.err = true, err
		close(s.states)
	}
}

// sessionHub fans a session's state changes out to every subscriber, so
// that each owner (the load manager, the ledger client, a cache) sees every
// state, and a slow one that overflows loses only its own stream.
//
// Lock rules: mu guards every field; deliveries never block under it.
type sessionHub struct {
	mu      sync.Mutex
	subs    []*SessionWatcher
	current SessionState // 0 before the first state
	ended   bool
	err     error
}

func newSessionHub() *sessionHub { return &sessionHub{} }

// subscribe returns a new stream that starts with the current state.
func (h *sessionHub) subscribe() *SessionWatcher {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := newSessionWatcher()
	if h.current != 0 {
		w.deliver(h.current)
	}
	if h.ended {
		w.end(h.err)
		return w
	}
	h.subs = append(h.subs, w)
	return w
}

func (h *sessionHub) deliver(st SessionState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current = st
	kept := h.subs[:0]
	for _, w := range h.subs {
		w.deliver(st)
		if w.Err() == nil {
			kept = append(kept, w)
		}
	}
	h.subs = kept
}

func (h *sessionHub) end(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.ended, h.err = true, err
	for _, w := range h.subs {
		w.end(err)
	}
	h.subs = nil
}
