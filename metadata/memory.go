package metadata

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemoryServer is an in-process metadata tree shared by any number of
// sessions (Stores), with ZooKeeper semantics. Tests use several sessions on
// one server to check ephemeral nodes and watches across "processes", and
// ExpireSession to simulate a ZooKeeper session expiry.
//
// Lock rules: mu guards the tree, the sessions and the watcher lists.
// Events are delivered under mu, so every watcher sees changes in commit
// order; delivery never blocks (see Watcher.deliver).
type MemoryServer struct {
	mu       sync.Mutex
	nodes    map[string]*memNode
	sessions map[int64]*memoryStore
	nextID   int64
	now      func() time.Time
}

type memNode struct {
	value    []byte
	version  int64
	cversion int64 // child changes; source of sequential suffixes
	created  time.Time
	modified time.Time
	owner    int64 // session id for ephemeral nodes, else 0
	children map[string]struct{}
}

// NewMemoryServer returns an empty tree holding only "/".
func NewMemoryServer() *MemoryServer {
	s := &MemoryServer{nodes: map[string]*memNode{}, sessions: map[int64]*memoryStore{}, now: time.Now}
	s.nodes["/"] = &memNode{children: map[string]struct{}{}, created: s.now(), modified: s.now()}
	return s
}

// NewSession opens a session (a Store) on the server.
func (s *MemoryServer) NewSession() Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	st := &memoryStore{srv: s, id: s.nextID, session: newSessionWatcher()}
	s.sessions[st.id] = st
	st.session.deliver(SessionConnected)
	return st
}

// ExpireSession ends a session as a ZooKeeper expiry would: its ephemeral
// nodes are deleted, it sees SessionLost, and its operations fail with
// ErrSessionLost from then on.
func (s *MemoryServer) ExpireSession(store Store) {
	st, ok := store.(*memoryStore)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endSessionLocked(st, ErrSessionLost)
	st.session.deliver(SessionLost)
}

func (s *MemoryServer) endSessionLocked(st *memoryStore, reason error) {
	if st.ended != nil {
		return
	}
	st.ended = reason
	delete(s.sessions, st.id)
	var ephemerals []string
	for p, n := range s.nodes {
		if n.owner == st.id {
			ephemerals = append(ephemerals, p)
		}
	}
	sort.Strings(ephemerals)
	for _, p := range ephemerals {
		s.deleteLocked(p)
	}
	for _, w := range st.watchers {
		w.end(reason)
	}
	st.watchers = nil
}

func (s *MemoryServer) statLocked(n *memNode) Stat {
	return Stat{Version: n.version, Created: n.created, Modified: n.modified,
		Ephemeral: n.owner != 0, NumChildren: len(n.children)}
}

// notifyLocked delivers an event to every watcher of every live session.
func (s *MemoryServer) notifyLocked(ev Event) {
	for _, st := range s.sessions {
		kept := st.watchers[:0]
		for _, w := range st.watchers {
			if !underPrefix(ev.Path, w.prefix) || w.deliver(ev) {
				kept = append(kept, w)
			}
		}
		st.watchers = kept
	}
}

// ensureParentsLocked creates missing ancestors of path as persistent,
// empty nodes.
func (s *MemoryServer) ensureParentsLocked(path string) error {
	parent := parentOf(path)
	if n, ok := s.nodes[parent]; ok {
		if n.owner != 0 {
			return ErrEphemeralKids
		}
		return nil
	}
	if err := s.ensureParentsLocked(parent); err != nil {
		return err
	}
	s.createLocked(parent, nil, 0)
	return nil
}

func (s *MemoryServer) createLocked(path string, value []byte, owner int64) *memNode {
	now := s.now()
	n := &memNode{value: append([]byte(nil), value...), created: now, modified: now, owner: owner,
		children: map[string]struct{}{}}
	s.nodes[path] = n
	parent := s.nodes[parentOf(path)]
	parent.children[path[strings.LastIndexByte(path, '/')+1:]] = struct{}{}
	parent.cversion++
	s.notifyLocked(Event{Type: EventCreated, Path: path})
	s.notifyLocked(Event{Type: EventChildrenChanged, Path: parentOf(path)})
	return n
}

func (s *MemoryServer) deleteLocked(path string) {
	delete(s.nodes, path)
	parent := s.nodes[parentOf(path)]
	delete(parent.children, path[strings.LastIndexByte(path, '/')+1:])
	parent.cversion++
	s.notifyLocked(Event{Type: EventDeleted, Path: path})
	s.notifyLocked(Event{Type: EventChildrenChanged, Path: parentOf(path)})
}

// memoryStore is one session on a MemoryServer.
type memoryStore struct {
	srv      *MemoryServer
	id       int64
	session  *SessionWatcher
	watchers []*Watcher // guarded by srv.mu
	ended    error      // guarded by srv.mu: ErrClosed or ErrSessionLost once over
}

// begin checks the context and the session and takes the server lock.
func (m *memoryStore) begin(ctx context.Context, op, path string) error {
	if err := ctx.Err(); err != nil {
		return opError(op, path, err)
	}
	if err := ValidatePath(path); err != nil {
		return opError(op, path, err)
	}
	m.srv.mu.Lock()
	if m.ended != nil {
		m.srv.mu.Unlock()
		return opError(op, path, m.ended)
	}
	return nil
}

func (m *memoryStore) end() { m.srv.mu.Unlock() }

func (m *memoryStore) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	if err := m.begin(ctx, "get", path); err != nil {
		return nil, Stat{}, err
	}
	defer m.end()
	n, ok := m.srv.nodes[path]
	if !ok {
		return nil, Stat{}, opError("get", path, ErrNotFound)
	}
	return append([]byte(nil), n.value...), m.srv.statLocked(n), nil
}

func (m *memoryStore) Put(ctx context.Context, path string, value []byte, expectedVersion int64) (Stat, error) {
	if err := validateValue(path, value); err != nil {
		return Stat{}, opError("put", path, err)
	}
	if err := m.begin(ctx, "put", path); err != nil {
		return Stat{}, err
	}
	defer m.end()
	n, ok := m.srv.nodes[path]
	switch {
	case !ok && expectedVersion != AnyVersion:
		return Stat{}, opError("put", path, ErrNotFound)
	case !ok:
		if path == "/" {
			return Stat{}, opError("put", path, ErrInvalidPath)
		}
		if err := m.srv.ensureParentsLocked(path); err != nil {
			return Stat{}, opError("put", path, err)
		}
		return m.srv.statLocked(m.srv.createLocked(path, value, 0)), nil
	case expectedVersion != AnyVersion && expectedVersion != n.version:
		return Stat{}, opError("put", path, fmt.Errorf("%w: expected %d, node has %d", ErrBadVersion, expectedVersion, n.version))
	}
	n.value = append([]byte(nil), value...)
	n.version++
	n.modified = m.srv.now()
	m.srv.notifyLocked(Event{Type: EventModified, Path: path})
	return m.srv.statLocked(n), nil
}

func (m *memoryStore) Create(ctx context.Context, path string, value []byte, opts CreateOptions) (string, Stat, error) {
	if err := validateValue(path, value); err != nil {
		return "", Stat{}, opError("create", path, err)
	}
	if err := m.begin(ctx, "create", path); err != nil {
		return "", Stat{}, err
	}
	defer m.end()
	if path == "/" {
		return "", Stat{}, opError("create", path, ErrExists)
	}
	if err := m.srv.ensureParentsLocked(path); err != nil {
		return "", Stat{}, opError("create", path, err)
	}
	if opts.Sequential {
		path = fmt.Sprintf("%s%010d", path, m.srv.nodes[parentOf(path)].cversion)
	}
	if _, ok := m.srv.nodes[path]; ok {
		return "", Stat{}, opError("create", path, ErrExists)
	}
	var owner int64
	if opts.Ephemeral {
		owner = m.id
	}
	return path, m.srv.statLocked(m.srv.createLocked(path, value, owner)), nil
}

func (m *memoryStore) Delete(ctx context.Context, path string, expectedVersion int64) error {
	if err := m.begin(ctx, "delete", path); err != nil {
		return err
	}
	defer m.end()
	n, ok := m.srv.nodes[path]
	switch {
	case path == "/":
		return opError("delete", path, ErrInvalidPath)
	case !ok:
		return opError("delete", path, ErrNotFound)
	case expectedVersion != AnyVersion && expectedVersion != n.version:
		return opError("delete", path, fmt.Errorf("%w: expected %d, node has %d", ErrBadVersion, expectedVersion, n.version))
	case len(n.children) > 0:
		return opError("delete", path, ErrNotEmpty)
	}
	m.srv.deleteLocked(path)
	return nil
}

func (m *memoryStore) Children(ctx context.Context, path string) ([]string, error) {
	if err := m.begin(ctx, "children", path); err != nil {
		return nil, err
	}
	defer m.end()
	n, ok := m.srv.nodes[path]
	if !ok {
		return nil, opError("children", path, ErrNotFound)
	}
	names := make([]string, 0, len(n.children))
	for c := range n.children {
		names = append(names, c)
	}
	sort.Strings(names)
	return names, nil
}

func (m *memoryStore) Exists(ctx context.Context, path string) (bool, Stat, error) {
	if err := m.begin(ctx, "exists", path); err != nil {
		return false, Stat{}, err
	}
	defer m.end()
	n, ok := m.srv.nodes[path]
	if !ok {
		return false, Stat{}, nil
	}
	return true, m.srv.statLocked(n), nil
}

func (m *memoryStore) Watch(ctx context.Context, prefix string) (*Watcher, error) {
	if err := m.begin(ctx, "watch", prefix); err != nil {
		return nil, err
	}
	defer m.end()
	w := newWatcher(prefix, m.detach)
	m.watchers = append(m.watchers, w)
	return w, nil
}

func (m *memoryStore) detach(w *Watcher) {
	m.srv.mu.Lock()
	defer m.srv.mu.Unlock()
	for i, x := range m.watchers {
		if x == w {
			m.watchers = append(m.watchers[:i], m.watchers[i+1:]...)
			return
		}
	}
}

func (m *memoryStore) SessionEvents() *SessionWatcher { return m.session }

func (m *memoryStore) Close() error {
	m.srv.mu.Lock()
	defer m.srv.mu.Unlock()
	if m.ended != nil {
		if m.ended == ErrClosed {
			return opError("close", "session", ErrClosed)
		}
		return nil
	}
	m.srv.endSessionLocked(m, ErrClosed)
	m.session.end(ErrClosed)
	return nil
}
