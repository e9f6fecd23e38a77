package metadata

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemoryServer is an in-process metadata tree shared by any number of
// sessions (Stores), with ZooKeeper semantics. Tests use several sessions on
// one server to check ephemeral nodes and watches across "processes", and
// ExpireSession to simulate a ZooKeeper session expiry. The local backend
// (LocalServer) is the same tree with a persister that makes every change
// durable before it is acknowledged.
//
// Lock rules: mu guards everything below it: the tree, the sessions, their
// watcher lists, the operation's pending changes and failed. A mutating
// operation changes the tree and records its events and dirty paths; before
// it releases mu, commitLocked persists the dirty paths (one synced batch)
// and only then delivers the events. Holding mu across the write keeps the
// order of durable writes the order of events, at a price: writes are
// serialised, one fsync each, with no group commit across sessions (a few
// hundred to a few thousand writes/s, which metadata traffic fits in).
// Delivery never blocks (see Watcher.deliver).
type MemoryServer struct {
	mu       sync.Mutex
	nodes    map[string]*memNode
	sessions map[int64]*memoryStore
	nextID   int64
	creates  int64 // nodes created so far: the next node's createID
	now      func() time.Time

	// pending and dirty are what the operation in progress changed; both
	// are emptied by commitLocked. dirty holds persistent paths to rewrite
	// or delete; it stays nil without a persister.
	pending []Event
	dirty   map[string]struct{}
	persist persister   // nil for the memory backend: nothing to make durable
	guard   *spaceGuard // local backend: refuses writes on a full disk (localspace.go)

	// failed is set once, when a persist fails: the tree may now differ
	// from disk, so every later operation of every session returns it.
	failed error
	closed bool // set by shutdown: new sessions start closed
}

// persister makes one operation's node changes durable, atomically, before
// the operation is acknowledged.
type persister interface {
	persist(changes []nodeChange) error
}

// nodeChange is a path to write (node set) or delete (node nil).
type nodeChange struct {
	path string
	node *memNode
}

type memNode struct {
	value    []byte
	version  int64
	cversion int64 // child changes; source of sequential suffixes
	created  time.Time
	modified time.Time
	createID int64 // Stat.CreateID: the server's creation count
	owner    int64 // session id for ephemeral nodes, else 0
	children map[string]struct{}
}

// NewMemoryServer returns an empty tree holding only "/".
func NewMemoryServer() *MemoryServer { return newMemoryServer(time.Now) }

func newMemoryServer(now func() time.Time) *MemoryServer {
	s := &MemoryServer{nodes: map[string]*memNode{}, sessions: map[int64]*memoryStore{}, now: now}
	s.nodes["/"] = &memNode{children: map[string]struct{}{}, created: s.now(), modified: s.now()}
	return s
}

// NewSession opens a session (a Store) on the server. On a failed or shut
// down server the session starts ended, and its operations say why.
func (s *MemoryServer) NewSession() Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	st := &memoryStore{srv: s, id: s.nextID, session: newSessionHub()}
	switch {
	case s.failed != nil:
		st.ended = s.failed
		st.session.end(s.failed)
	case s.closed:
		st.ended = ErrClosed
		st.session.end(ErrClosed)
	default:
		s.sessions[st.id] = st
		st.session.deliver(SessionConnected)
	}
	return st
}

// ExpireSession ends a session as a ZooKeeper expiry would: its ephemeral
// nodes are deleted, it sees SessionLost, and its operations fail with
// ErrSessionLost from then on.
func (s *MemoryServer) ExpireSession(store Store) {
	s.withSession(store, func(st *memoryStore) {
		// A failed commit here has failed the server, which every later
		// operation reports; the expiry itself has happened either way.
		_ = s.endSessionLocked(st, ErrSessionLost)
		st.session.deliver(SessionLost)
	})
}

// withSession runs fn on store's session under the server lock; stores
// of other kinds are ignored.
func (s *MemoryServer) withSession(store Store, fn func(st *memoryStore)) {
	st, ok := store.(*memoryStore)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(st)
}

// errDisconnected is what a disconnected session's operations fail with
// (Disconnect): as a ZooKeeper client's while it cannot reach a server.
var errDisconnected = errors.New("metadata: the store is unreachable (the session is disconnected)")

// Disconnect cuts a session off from the server as a network partition
// would, without ending it: its watches end with ErrWatchInterrupted, it
// sees SessionSuspended, its operations fail until Reconnect, and its
// ephemeral nodes stay (the server has not expired it; ExpireSession
// does that).
func (s *MemoryServer) Disconnect(store Store) {
	s.withSession(store, func(st *memoryStore) {
		if st.ended != nil || st.disconnected {
			return
		}
		st.disconnected = true
		for _, w := range st.watchers {
			w.end(ErrWatchInterrupted)
		}
		st.watchers = nil
		st.session.deliver(SessionSuspended)
	})
}

// Reconnect ends a Disconnect: the same session works again and sees
// SessionReconnected.
func (s *MemoryServer) Reconnect(store Store) {
	s.withSession(store, func(st *memoryStore) {
		if st.ended != nil || !st.disconnected {
			return
		}
		st.disconnected = false
		st.session.deliver(SessionReconnected)
	})
}

// endSessionLocked ends a session and deletes its ephemeral nodes, then
// commits the deletions (the parents' child counters) like any operation.
func (s *MemoryServer) endSessionLocked(st *memoryStore, reason error) error {
	if st.ended != nil {
		return nil
	}
	st.ended = reason
	delete(s.sessions, st.id)
	for _, w := range st.watchers {
		w.end(reason)
	}
	st.watchers = nil
	if s.failed != nil {
		return nil // the tree is frozen once the store failed
	}
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
	return s.commitLocked()
}

// shutdown closes every session as its Close would, in id order, and makes
// sessions opened later start closed. It returns the first commit error.
func (s *MemoryServer) shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	ids := make([]int64, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var first error
	for _, id := range ids {
		st := s.sessions[id]
		if err := s.endSessionLocked(st, ErrClosed); err != nil && first == nil {
			first = err
		}
		st.session.end(ErrClosed)
	}
	return first
}

func (s *MemoryServer) statLocked(n *memNode) Stat {
	return Stat{Version: n.version, Created: n.created, Modified: n.modified, CreateID: n.createID,
		Ephemeral: n.owner != 0, NumChildren: len(n.children)}
}

// commitLocked ends every mutating operation, successful or not (a failed
// Create may have made parents): with a persister it first makes the
// changed paths durable in one batch; only then are the operation's events
// delivered, in order. If the write fails the events are dropped, because
// nothing they describe is durable, and the server fails for good.
func (s *MemoryServer) commitLocked() error {
	events := s.pending
	s.pending = nil
	if s.persist != nil && len(s.dirty) > 0 {
		changes := s.changesLocked()
		clear(s.dirty)
		if err := s.persist.persist(changes); err != nil {
			s.failLocked(err)
			return s.failed
		}
	}
	for _, ev := range events {
		s.notifyLocked(ev)
	}
	return nil
}

// changesLocked turns the dirty paths into writes, sorted by path: a node
// that exists and is persistent is written, anything else is deleted (an
// ephemeral node is never on disk).
func (s *MemoryServer) changesLocked() []nodeChange {
	changes := make([]nodeChange, 0, len(s.dirty))
	for p := range s.dirty {
		c := nodeChange{path: p}
		if n, ok := s.nodes[p]; ok && n.owner == 0 {
			c.node = n
		}
		changes = append(changes, c)
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].path < changes[j].path })
	return changes
}

// failLocked makes the server fail-stop: every watcher ends with the
// failure, and every session sees SessionLost, because its ephemeral nodes
// will not survive the restart the process now needs.
func (s *MemoryServer) failLocked(cause error) {
	s.failed = fmt.Errorf("%w: %w", ErrStoreFailed, cause)
	s.pending = nil
	for _, st := range s.sessions {
		for _, w := range st.watchers {
			w.end(s.failed)
		}
		st.watchers = nil
		st.session.deliver(SessionLost)
		st.session.end(s.failed)
	}
}

// markDirtyLocked records that path must be rewritten (or deleted) on disk.
func (s *MemoryServer) markDirtyLocked(path string) {
	if s.dirty != nil {
		s.dirty[path] = struct{}{}
	}
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

// createLocked adds a node. The parent is dirty even for an ephemeral
// child: its child counter must survive a restart, or a sequential name
// could be handed out twice.
func (s *MemoryServer) createLocked(path string, value []byte, owner int64) *memNode {
	now := s.now()
	s.creates++
	n := &memNode{value: append([]byte(nil), value...), created: now, modified: now, owner: owner,
		createID: s.creates, children: map[string]struct{}{}}
	s.nodes[path] = n
	parent := s.nodes[parentOf(path)]
	parent.children[path[strings.LastIndexByte(path, '/')+1:]] = struct{}{}
	parent.cversion++
	if owner == 0 {
		s.markDirtyLocked(path)
	}
	s.markDirtyLocked(parentOf(path))
	s.pending = append(s.pending, Event{Type: EventCreated, Path: path},
		Event{Type: EventChildrenChanged, Path: parentOf(path)})
	return n
}

func (s *MemoryServer) deleteLocked(path string) {
	if s.nodes[path].owner == 0 {
		s.markDirtyLocked(path)
	}
	delete(s.nodes, path)
	parent := s.nodes[parentOf(path)]
	delete(parent.children, path[strings.LastIndexByte(path, '/')+1:])
	parent.cversion++
	s.markDirtyLocked(parentOf(path))
	s.pending = append(s.pending, Event{Type: EventDeleted, Path: path},
		Event{Type: EventChildrenChanged, Path: parentOf(path)})
}

// modifyLocked replaces a node's value.
func (s *MemoryServer) modifyLocked(path string, n *memNode, value []byte) {
	n.value = append([]byte(nil), value...)
	n.version++
	n.modified = s.now()
	if n.owner == 0 {
		s.markDirtyLocked(path)
	}
	s.pending = append(s.pending, Event{Type: EventModified, Path: path})
}

// memoryStore is one session on a MemoryServer.
type memoryStore struct {
	srv      *MemoryServer
	id       int64
	session  *sessionHub
	watchers []*Watcher // guarded by srv.mu
	ended    error      // guarded by srv.mu: ErrClosed or ErrSessionLost once over
	// disconnected: cut off by Disconnect until Reconnect (guarded by srv.mu).
	disconnected bool
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
	switch {
	case m.srv.failed != nil:
		m.srv.mu.Unlock()
		return opError(op, path, m.srv.failed)
	case m.ended != nil:
		m.srv.mu.Unlock()
		return opError(op, path, m.ended)
	case m.disconnected:
		m.srv.mu.Unlock()
		return opError(op, path, errDisconnected)
	}
	return nil
}

func (m *memoryStore) end() { m.srv.mu.Unlock() }

// write runs a mutating operation under the server lock and commits what
// it changed before the lock is released; a failed commit overrides fn's
// result, since nothing of it is durable.
func (m *memoryStore) write(ctx context.Context, op, path string, fn func() error) error {
	if err := m.begin(ctx, op, path); err != nil {
		return err
	}
	defer m.end()
	err := fn()
	if cerr := m.srv.commitLocked(); cerr != nil {
		return opError(op, path, cerr)
	}
	return err
}

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
	var st Stat
	err := m.write(ctx, "put", path, func() (err error) {
		if n, ok := m.srv.nodes[path]; !ok || n.owner == 0 {
			if err := m.srv.admitLocked(true); err != nil {
				return opError("put", path, err)
			}
		}
		st, err = m.putLocked(path, value, expectedVersion)
		return err
	})
	if err != nil {
		return Stat{}, err
	}
	return st, nil
}

func (m *memoryStore) putLocked(path string, value []byte, expectedVersion int64) (Stat, error) {
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
	m.srv.modifyLocked(path, n, value)
	return m.srv.statLocked(n), nil
}

func (m *memoryStore) Create(ctx context.Context, path string, value []byte, opts CreateOptions) (string, Stat, error) {
	if err := validateValue(path, value); err != nil {
		return "", Stat{}, opError("create", path, err)
	}
	var (
		made string
		st   Stat
	)
	err := m.write(ctx, "create", path, func() (err error) {
		if err := m.srv.admitLocked(!opts.Ephemeral); err != nil {
			return opError("create", path, err)
		}
		made, st, err = m.createLocked(path, value, opts)
		return err
	})
	if err != nil {
		return "", Stat{}, err
	}
	return made, st, nil
}

func (m *memoryStore) createLocked(path string, value []byte, opts CreateOptions) (string, Stat, error) {
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
	return m.write(ctx, "delete", path, func() error {
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
	})
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

func (m *memoryStore) SessionEvents() *SessionWatcher { return m.session.subscribe() }

func (m *memoryStore) Close() error {
	m.srv.mu.Lock()
	defer m.srv.mu.Unlock()
	if m.ended != nil {
		if m.ended == ErrClosed {
			return opError("close", "session", ErrClosed)
		}
		return nil
	}
	err := m.srv.endSessionLocked(m, ErrClosed)
	m.session.end(ErrClosed)
	if err != nil {
		return opError("close", "session", err)
	}
	return nil
}
