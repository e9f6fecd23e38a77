package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZKOptions tune the ZooKeeper backend. Zero values take Pulsar's defaults.
type ZKOptions struct {
	// SessionTimeout is the ZooKeeper session timeout asked for
	// (metadataStoreSessionTimeoutMillis; default 30 s). The server clamps
	// it to its [minSessionTimeout, maxSessionTimeout].
	SessionTimeout time.Duration
	// OperationTimeout bounds every operation whose context has no earlier
	// deadline (metadataStoreOperationTimeoutSeconds; default 30 s).
	OperationTimeout time.Duration
	// Dial opens connections to servers; tests inject network faults
	// here. Default: net.DialTimeout.
	Dial func(network, address string, timeout time.Duration) (net.Conn, error)
	// Logger receives one line per event an operator would act on.
	Logger *slog.Logger
}

func (o ZKOptions) withDefaults() ZKOptions {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Second
	}
	if o.OperationTimeout <= 0 {
		o.OperationTimeout = 30 * time.Second
	}
	if o.Dial == nil {
		o.Dial = net.DialTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// zkStore is one ZooKeeper session.
//
// Lock rules: mu guards watchers, the session flags and ended; the event
// callback (go-zookeeper's receive goroutine for node events, its connect
// goroutine for state changes) takes mu and never blocks under it.
// regSem serialises watch registration round trips with removals, so an
// add and a remove for one prefix never cross on the wire; it is never
// taken under mu, and Watch gives up waiting for it when its context ends.
type zkStore struct {
	conn    *zk.Conn                // set once Open's zk.Connect returns
	connRef atomic.Pointer[zk.Conn] // the same, for the callback, which may run before
	hosts   string
	chroot  string // "" or "/a/b": prepended to every path
	opts    ZKOptions
	log     *slog.Logger
	session *sessionHub
	ready   chan struct{} // closed at the first session

	expired      atomic.Bool  // set on expiry: dial refuses, so no new session replays queued requests
	lastHeard    atomic.Int64 // unix nanoseconds of the last bytes read from a server
	lastDialed   atomic.Int64 // unix nanoseconds of the last connection a server accepted
	dialFailures atomic.Int64
	lastDialErr  atomic.Value // error
	closing      chan struct{}
	closeOnce    sync.Once

	regSem chan struct{} // one watch (un)registration round trip at a time

	mu         sync.Mutex
	watchers   map[string][]*Watcher // by prefix (relative to chroot)
	hadSession bool
	suspended  bool
	lostTimer  *time.Timer // while suspended: fires when the server has expired the session
	suspendAt  time.Time   // when the session was last suspended
	ended      error       // ErrClosed or ErrSessionLost once the store is over
}

// OpenZK connects to ZooKeeper and waits, bounded by ctx, for a session.
// While no server answers it retries with backoff and logs each attempt.
func OpenZK(ctx context.Context, t Target, opts ZKOptions) (Store, error) {
	if t.Scheme != "zk" || len(t.Hosts) == 0 {
		return nil, fmt.Errorf("metadata: OpenZK needs a zk: target, got %+v", t)
	}
	opts = opts.withDefaults()
	s := &zkStore{hosts: strings.Join(t.Hosts, ","), chroot: t.Chroot, opts: opts,
		log:     opts.Logger.With("metadata_store", "zk:"+strings.Join(t.Hosts, ",")+t.Chroot),
		session: newSessionHub(), ready: make(chan struct{}), closing: make(chan struct{}),
		watchers: map[string][]*Watcher{}, regSem: make(chan struct{}, 1)}
	conn, _, err := zk.Connect(t.Hosts, opts.SessionTimeout,
		zk.WithEventCallback(s.onEvent), zk.WithDialer(s.dial), zk.WithLogger(zkLogger{s.log}),
		zk.WithHostProvider(&zkHosts{pause: s.sleep, quickFor: zkQuickRetryFor(opts.SessionTimeout)}))
	if err != nil {
		return nil, fmt.Errorf("metadata store zk:%s: %w", s.hosts, err)
	}
	s.conn = conn
	s.connRef.Store(conn)
	if err := s.awaitSession(ctx); err != nil {
		s.shutdown()
		return nil, err
	}
	if err := s.ensureChroot(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *zkStore) awaitSession(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		cause, _ := s.lastDialErr.Load().(error)
		return fmt.Errorf("metadata store zk:%s: no ZooKeeper session (%d failed connection attempts, last: %v): %w",
			s.hosts, s.dialFailures.Load(), cause, ctx.Err())
	}
}

func (s *zkStore) ensureChroot(ctx context.Context) error {
	if s.chroot == "" {
		return nil
	}
	return s.call(ctx, "open", "/", func() error { return s.ensureNode(s.chroot) })
}

// dial wraps the configured dialer with logging and backoff: go-zookeeper
// retries servers in a tight round with a one second pause per round; the
// backoff spaces attempts further while nothing answers, capped well under
// any session timeout so a briefly lost session is kept.
func (s *zkStore) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if s.expired.Load() {
		// go-zookeeper would open a fresh session and send requests still
		// queued for the expired one; their callers were told it was lost.
		return nil, fmt.Errorf("metadata: ZooKeeper session expired; not reconnecting: %w", ErrSessionLost)
	}
	c, err := s.opts.Dial(network, address, timeout)
	if err == nil {
		s.lastDialed.Store(time.Now().UnixNano())
		if n := s.dialFailures.Swap(0); n > 0 {
			s.log.Info("metadata: ZooKeeper reachable again", "server", address, "failed_attempts", n)
		}
		return &handshakeConn{Conn: c, limit: s.opts.SessionTimeout / 2, heard: &s.lastHeard}, nil
	}
	s.lastDialErr.Store(err)
	n := s.dialFailures.Add(1)
	delay := zkBackoff(n, s.opts.SessionTimeout)
	if n <= 3 || n%20 == 0 {
		s.log.Warn("metadata: cannot reach ZooKeeper, retrying", "server", address, "attempt", n,
			"retry_in", delay, "err", err)
	}
	s.sleep(delay)
	return nil, err
}

// handshakeConn bounds go-zookeeper's wait for a server's answer to its
// connect request. go-zookeeper waits ten times its receive timeout for
// it (more than six session timeouts), so a server that accepts
// connections before it serves them (a ZooKeeper starting up) held a
// reconnect for minutes, past the session's expiry (TestZKDownWhileRunning
// saw no answer for 30 s after the restarted server listened). Until the
// first bytes arrive, a read deadline is at most limit away (half the
// session timeout: a later answer is useless, the session is gone); then
// go-zookeeper's deadlines pass through.
//
// It also records when bytes last came from the server (heard): the
// session's expiry is measured from there (onState).
type handshakeConn struct {
	net.Conn
	limit    time.Duration
	answered atomic.Bool
	heard    *atomic.Int64
}

func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	if !c.answered.Load() && !t.IsZero() && c.limit > 0 {
		if latest := time.Now().Add(c.limit); t.After(latest) {
			t = latest
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.answered.Store(true)
		if c.heard != nil {
			c.heard.Store(time.Now().UnixNano())
		}
	}
	return n, err
}

// zkBackoff doubles from 50 ms to at most a tenth of the session timeout
// (and never over 2 s).
func zkBackoff(attempt int64, sessionTimeout time.Duration) time.Duration {
	limit := min(2*time.Second, sessionTimeout/10)
	d := 50 * time.Millisecond << min(attempt-1, 10)
	return min(d, limit)
}

// onEvent is go-zookeeper's event callback; it must not block.
func (s *zkStore) onEvent(ev zk.Event) {
	if ev.Type == zk.EventSession {
		s.onState(ev.State, ev.Server)
		return
	}
	if ev.Type == zk.EventNotWatching {
		s.endWatchers(ErrWatchInterrupted)
		return
	}
	path, ok := s.relative(ev.Path)
	if !ok {
		return
	}
	var typ EventType
	switch ev.Type {
	case zk.EventNodeCreated:
		typ = EventCreated
	case zk.EventNodeDataChanged:
		typ = EventModified
	case zk.EventNodeDeleted:
		typ = EventDeleted
	default:
		return // recursive watches never send child events: we derive them
	}
	s.fanOut(Event{Type: typ, Path: path})
}

// fanOut delivers ev to the watchers whose prefix covers it and, for a
// create or delete, a children-changed event for the parent, as the other
// backends do.
func (s *zkStore) fanOut(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	childEv := ev.Type == EventCreated || ev.Type == EventDeleted
	for prefix, ws := range s.watchers {
		kept := ws[:0]
		for _, w := range ws {
			open := true
			if underPrefix(ev.Path, prefix) {
				open = w.deliver(ev)
			}
			if open && childEv && ev.Path != "/" && underPrefix(parentOf(ev.Path), prefix) {
				open = w.deliver(Event{Type: EventChildrenChanged, Path: parentOf(ev.Path)})
			}
			if open {
				kept = append(kept, w)
			}
		}
		s.watchers[prefix] = kept
	}
}

func (s *zkStore) onState(state zk.State, server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return
	}
	switch state {
	case zk.StateHasSession:
		s.onSessionLocked(server)
	case zk.StateDisconnected:
		if s.hadSession && !s.suspended {
			s.suspended = true
			s.log.Warn("metadata: lost connection to ZooKeeper; session suspended, watches must be re-established", "server", server)
			s.session.deliver(SessionSuspended)
			s.endWatchersLocked(ErrWatchInterrupted)
			s.suspendAt = time.Now()
			s.lostTimer = time.AfterFunc(s.untilExpiry(), s.suspendedPastExpiry)
		}
	case zk.StateExpired:
		s.expireLocked("metadata: ZooKeeper session expired; its ephemeral nodes are gone and this store is closed")
	case zk.StateAuthFailed:
		s.log.Error("metadata: ZooKeeper authentication failed", "server", server)
	}
}

// untilExpiry is how long from now the servers may still hold the session:
// the session timeout counted from the last bytes a server sent, and half a
// timeout more. ZooKeeper expires sessions in tickTime buckets, at the first
// tick past the timeout, and tickTime is at most half the session timeout
// (the shortest timeout it grants is two ticks): a client that reconnects
// within that is still welcome, and keeps what it owns (a broker cut off
// from a ZooKeeper node that lost its quorum reconnected elsewhere 4-5 s
// after it last heard one, with 4 s sessions, and kept its session). After
// it the session is gone whichever server last heard from us (Pulsar's
// session watcher waits about as long: the timeout after a disconnection
// that is itself noticed two thirds of a timeout late).
func (s *zkStore) untilExpiry() time.Duration {
	heard := time.Unix(0, s.lastHeard.Load())
	return max(time.Until(heard.Add(s.opts.SessionTimeout*3/2)), 0)
}

// suspendedPastExpiry ends a session still suspended when it has expired on
// the servers by any count (untilExpiry; Pulsar's session watcher does the
// same): go-zookeeper reports the expiry only once it reaches a server
// again, so a broker cut from ZooKeeper would keep serving the bundles that
// other brokers may take by now, and its clients would not look them up
// again until the cut heals.
//
// Only while no server accepts a connection, though: servers that accept
// one but do not answer the session's handshake are electing a leader (the
// old one was cut off or died), and a new leader renews every session it
// inherits, so the session may well survive; the store then waits for the
// servers' own answer (reconnected, or expired), checking again every half
// timeout.
func (s *zkStore) suspendedPastExpiry() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil || !s.suspended {
		return
	}
	if time.Unix(0, s.lastDialed.Load()).After(s.suspendAt) {
		s.lostTimer = time.AfterFunc(s.opts.SessionTimeout/2, s.suspendedPastExpiry)
		return
	}
	s.expireLocked(fmt.Sprintf("metadata: no ZooKeeper server reached for one and a half session timeouts (%s) since one was last heard: "+
		"the session has expired; its ephemeral nodes are gone and this store is closed", s.opts.SessionTimeout*3/2))
}

// expireLocked ends the store on a lost session. Caller holds mu.
func (s *zkStore) expireLocked(msg string) {
	s.expired.Store(true)
	s.log.Error(msg)
	s.ended = ErrSessionLost
	if s.lostTimer != nil {
		s.lostTimer.Stop()
	}
	s.session.deliver(SessionLost)
	s.endWatchersLocked(ErrSessionLost)
	go s.shutdown() // a new session would silently drop what the old one owned
}

func (s *zkStore) onSessionLocked(server string) {
	switch {
	case !s.hadSession:
		s.hadSession = true
		var id int64
		if c := s.connRef.Load(); c != nil {
			id = c.SessionID()
		}
		s.log.Info("metadata: ZooKeeper session established", "server", server, "session_id", fmt.Sprintf("%#x", id))
		s.session.deliver(SessionConnected)
		close(s.ready)
	case s.suspended:
		s.suspended = false
		if s.lostTimer != nil {
			s.lostTimer.Stop()
		}
		s.log.Info("metadata: reconnected to ZooKeeper; same session", "server", server)
		s.session.deliver(SessionReconnected)
	}
}

func (s *zkStore) endWatchers(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endWatchersLocked(err)
}

func (s *zkStore) endWatchersLocked(err error) {
	for _, ws := range s.watchers {
		for _, w := range ws {
			w.end(err)
		}
	}
	s.watchers = map[string][]*Watcher{}
}

// shutdown stops the connection without waiting on a dead server.
func (s *zkStore) shutdown() {
	s.closeOnce.Do(func() {
		close(s.closing)
		if c := s.connRef.Load(); c != nil {
			c.Close()
		}
	})
}

// absolute maps a store path into the chroot.
func (s *zkStore) absolute(path string) string {
	if path == "/" && s.chroot != "" {
		return s.chroot
	}
	return s.chroot + path
}

// relative maps a server path back; ok is false outside the chroot.
func (s *zkStore) relative(path string) (string, bool) {
	if s.chroot == "" {
		return path, true
	}
	if path == s.chroot {
		return "/", true
	}
	if strings.HasPrefix(path, s.chroot+"/") {
		return path[len(s.chroot):], true
	}
	return "", false
}

// call runs one ZooKeeper round trip bounded by ctx and the operation
// timeout. go-zookeeper's calls take no context, so the call runs on its
// own goroutine; on timeout that goroutine finishes (or fails when the
// connection does) on its own and its results are discarded.
func (s *zkStore) call(ctx context.Context, op, path string, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return opError(op, path, err)
	}
	if err := ValidatePath(path); err != nil {
		return opError(op, path, err)
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		return opError(op, path, ended)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OperationTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return s.mapError(op, path, err)
	case <-ctx.Done():
		return opError(op, path, fmt.Errorf("no answer from ZooKeeper %s (connection %s): %w",
			s.hosts, s.conn.State(), ctx.Err()))
	}
}

// mapError turns go-zookeeper errors into the contract's.
func (s *zkStore) mapError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	for _, m := range []struct{ zk, our error }{
		{zk.ErrNoNode, ErrNotFound}, {zk.ErrNodeExists, ErrExists}, {zk.ErrBadVersion, ErrBadVersion},
		{zk.ErrNotEmpty, ErrNotEmpty}, {zk.ErrNoChildrenForEphemerals, ErrEphemeralKids},
		{zk.ErrSessionExpired, ErrSessionLost}, {zk.ErrInvalidPath, ErrInvalidPath},
		{ErrEphemeralKids, ErrEphemeralKids}, {ErrBadVersion, ErrBadVersion},
	} {
		if errors.Is(err, m.zk) {
			return opError(op, path, m.our)
		}
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended != nil {
		return opError(op, path, ended)
	}
	if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrClosing) {
		return opError(op, path, fmt.Errorf("ZooKeeper %s unreachable: %w", s.hosts, err))
	}
	return opError(op, path, fmt.Errorf("ZooKeeper %s: %w", s.hosts, err))
}

func zkStat(st *zk.Stat) Stat {
	if st == nil {
		return Stat{}
	}
	return Stat{Version: int64(st.Version), Created: time.UnixMilli(st.Ctime), Modified: time.UnixMilli(st.Mtime),
		CreateID: st.Czxid, Ephemeral: st.EphemeralOwner != 0, NumChildren: int(st.NumChildren)}
}

// zkVersion converts an expected version; versions past ZooKeeper's int32
// can never match.
func zkVersion(v int64) (int32, error) {
	if v == AnyVersion {
		return -1, nil
	}
	if v < 0 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: expected version %d is outside ZooKeeper's range", ErrBadVersion, v)
	}
	return int32(v), nil
}

var zkACL = zk.WorldACL(zk.PermAll)

func (s *zkStore) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	var value []byte
	var st *zk.Stat
	err := s.call(ctx, "get", path, func() (err error) {
		value, st, err = s.conn.Get(s.absolute(path))
		return err
	})
	if err != nil {
		return nil, Stat{}, err
	}
	return value, zkStat(st), nil
}

func (s *zkStore) Put(ctx context.Context, path string, value []byte, expectedVersion int64) (Stat, error) {
	if err := validateValue(path, value); err != nil {
		return Stat{}, opError("put", path, err)
	}
	version, err := zkVersion(expectedVersion)
	if err != nil {
		return Stat{}, opError("put", path, err)
	}
	var st *zk.Stat
	err = s.call(ctx, "put", path, func() error {
		var err error
		st, err = s.put(s.absolute(path), value, version)
		return err
	})
	if err != nil { // st may still be written by an abandoned call
		return Stat{}, err
	}
	return zkStat(st), nil
}

// put sets a value; with version -1 it creates the node (and parents)
// when missing, retrying if a concurrent create or delete interleaves.
func (s *zkStore) put(abs string, value []byte, version int32) (*zk.Stat, error) {
	for attempt := 0; ; attempt++ {
		st, err := s.conn.Set(abs, value, version)
		if !errors.Is(err, zk.ErrNoNode) || version != -1 {
			return st, err
		}
		_, err = s.createWithParents(abs, value, zk.FlagPersistent)
		if errors.Is(err, zk.ErrNodeExists) && attempt < 100 {
			continue // created by someone else meanwhile: set it
		}
		if err != nil {
			return nil, err
		}
		now := time.Now().UnixMilli()
		return &zk.Stat{Ctime: now, Mtime: now}, nil
	}
}

func (s *zkStore) Create(ctx context.Context, path string, value []byte, opts CreateOptions) (string, Stat, error) {
	if err := validateValue(path, value); err != nil {
		return "", Stat{}, opError("create", path, err)
	}
	if path == "/" {
		return "", Stat{}, opError("create", path, ErrExists)
	}
	var flags int32
	if opts.Ephemeral {
		flags |= zk.FlagEphemeral
	}
	if opts.Sequential {
		flags |= zk.FlagSequence
	}
	var created string
	err := s.call(ctx, "create", path, func() (err error) {
		created, err = s.createWithParents(s.absolute(path), value, flags)
		return err
	})
	if err != nil {
		return "", Stat{}, err
	}
	rel, _ := s.relative(created)
	// ZooKeeper's create reply has no stat; the times are this client's.
	now := time.Now()
	return rel, Stat{Created: now, Modified: now, Ephemeral: opts.Ephemeral}, nil
}

// createWithParents creates abs, first creating missing ancestors as
// empty persistent nodes.
func (s *zkStore) createWithParents(abs string, value []byte, flags int32) (string, error) {
	for attempt := 0; ; attempt++ {
		created, err := s.conn.Create(abs, value, flags, zkACL)
		if !errors.Is(err, zk.ErrNoNode) || attempt == 10 {
			return created, err
		}
		if err := s.ensureNode(zkParent(abs)); err != nil {
			return "", err
		}
	}
}

// ensureNode creates abs and its ancestors if missing.
func (s *zkStore) ensureNode(abs string) error {
	if abs == "/" {
		return nil
	}
	_, err := s.conn.Create(abs, nil, zk.FlagPersistent, zkACL)
	if errors.Is(err, zk.ErrNoNode) {
		if err := s.ensureNode(zkParent(abs)); err != nil {
			return err
		}
		_, err = s.conn.Create(abs, nil, zk.FlagPersistent, zkACL)
	}
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

func zkParent(abs string) string {
	i := strings.LastIndexByte(abs, '/')
	if i <= 0 {
		return "/"
	}
	return abs[:i]
}

func (s *zkStore) Delete(ctx context.Context, path string, expectedVersion int64) error {
	if path == "/" {
		return opError("delete", path, ErrInvalidPath)
	}
	version, err := zkVersion(expectedVersion)
	if err != nil {
		return opError("delete", path, err)
	}
	return s.call(ctx, "delete", path, func() error { return s.conn.Delete(s.absolute(path), version) })
}

func (s *zkStore) Children(ctx context.Context, path string) ([]string, error) {
	var kids []string
	err := s.call(ctx, "children", path, func() (err error) {
		kids, _, err = s.conn.Children(s.absolute(path))
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(kids)
	return kids, nil
}

func (s *zkStore) Exists(ctx context.Context, path string) (bool, Stat, error) {
	var ok bool
	var st *zk.Stat
	err := s.call(ctx, "exists", path, func() (err error) {
		ok, st, err = s.conn.Exists(s.absolute(path))
		return err
	})
	if err != nil || !ok {
		return false, Stat{}, err
	}
	return true, zkStat(st), nil
}

// Sync implements Syncer: ZooKeeper's sync makes this session's server
// catch up with the leader, so the reads after it are current.
func (s *zkStore) Sync(ctx context.Context, path string) error {
	return s.call(ctx, "sync", path, func() error {
		_, err := s.conn.Sync(s.absolute(path))
		return err
	})
}

// Watch registers a persistent recursive watch on prefix (idempotent on
// the server for one connection) after adding the local watcher, so no
// event after Watch returns is missed.
func (s *zkStore) Watch(ctx context.Context, prefix string) (*Watcher, error) {
	select {
	case s.regSem <- struct{}{}:
	case <-ctx.Done():
		return nil, opError("watch", prefix, ctx.Err())
	}
	defer func() { <-s.regSem }()
	w := newWatcher(prefix, s.detach)
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return nil, opError("watch", prefix, s.ended)
	}
	s.watchers[prefix] = append(s.watchers[prefix], w)
	s.mu.Unlock()
	err := s.call(ctx, "watch", prefix, func() error {
		return zkAddPersistentRecursiveWatch(s.conn, s.absolute(prefix))
	})
	if err != nil {
		s.removeLocal(w)
		return nil, err
	}
	return w, nil
}

// removeLocal drops w from the local watchers.
func (s *zkStore) removeLocal(w *Watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.watchers[w.prefix]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(s.watchers, w.prefix)
		return
	}
	s.watchers[w.prefix] = ws
}

// unwatched reports whether the server-side watch on prefix should go: no
// local watcher left, and the session still connected.
func (s *zkStore) unwatched(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers[prefix]) == 0 && s.ended == nil && !s.suspended
}

// detach is Watcher.Close's hook. It returns at once; the server-side
// watch is removed in the background once no local watcher needs it. The
// check happens under regSem, so a Watch for the same prefix that started
// meanwhile keeps its registration.
func (s *zkStore) detach(w *Watcher) {
	s.removeLocal(w)
	go func() {
		select {
		case s.regSem <- struct{}{}:
		case <-s.closing:
			return
		}
		defer func() { <-s.regSem }()
		if !s.unwatched(w.prefix) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.OperationTimeout)
		defer cancel()
		err := s.call(ctx, "unwatch", w.prefix, func() error {
			return zkRemovePersistentRecursiveWatch(s.conn, s.absolute(w.prefix))
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			s.log.Warn("metadata: removing a ZooKeeper watch failed; the server keeps sending its events until the connection closes",
				"prefix", w.prefix, "err", err)
		}
	}()
}

func (s *zkStore) SessionEvents() *SessionWatcher { return s.session.subscribe() }

// Close ends the session: ZooKeeper deletes its ephemeral nodes.
func (s *zkStore) Close() error {
	s.mu.Lock()
	if s.ended == ErrClosed {
		s.mu.Unlock()
		return opError("close", "session", ErrClosed)
	}
	s.ended = ErrClosed
	s.endWatchersLocked(ErrClosed)
	s.session.end(ErrClosed)
	s.mu.Unlock()
	s.shutdown()
	return nil
}

// zkLogger sends go-zookeeper's own chatter to debug level: the store
// logs the events an operator acts on itself.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
}

// zkHosts hands go-zookeeper the configured host:port strings unresolved,
// so names are resolved at each dial (through the store's backoff and
// logging) instead of once at start, where one unresolvable name would
// fail the whole open and moved servers would never be found.
//
// It also paces reconnection. After a round of servers that all failed,
// go-zookeeper pauses a whole second (and fails the requests queued
// meanwhile). An ensemble electing a leader takes connections and hangs
// up until it has one, which here takes about 0.6 s after its leader
// dies: every client then waited some half a second more than the
// election. So for the first zkQuickRetryFor of an outage a failed round
// is followed by a short pause of its own (zkRoundPause) and go-zookeeper
// is not told a round ended; past that, it is, and pauses and fails the
// queued requests as before, so their callers hear of a long outage.
//
// Next and Connected run on go-zookeeper's connect goroutine only.
type zkHosts struct {
	hosts []string
	next  int
	tried int
	// rounds counts the full rounds without a session since outageAt.
	rounds   int
	outageAt time.Time
	// pause sleeps unless the store closes (reporting false then).
	pause func(time.Duration) bool
	// quickFor is how long failed rounds pause briefly (zkQuickRetryFor).
	quickFor time.Duration
}

func (h *zkHosts) Init(servers []string) error {
	if len(servers) == 0 {
		return errors.New("metadata: no ZooKeeper servers")
	}
	h.hosts = append([]string(nil), servers...)
	return nil
}

func (h *zkHosts) Len() int { return len(h.hosts) }

// Next returns the next server; retryStart is true after a full round
// without a connection once the outage outlasted quickFor (go-zookeeper
// then pauses and fails queued calls); before that Next pauses briefly
// itself.
func (h *zkHosts) Next() (string, bool) {
	server := h.hosts[h.next]
	h.next = (h.next + 1) % len(h.hosts)
	h.tried++
	if h.tried <= len(h.hosts) {
		return server, false
	}
	h.tried = 1
	h.rounds++
	if h.rounds == 1 {
		h.outageAt = time.Now()
	}
	// A pause cut short means the store is closing: go-zookeeper looks at
	// its own quit signal only when told a round ended.
	if time.Since(h.outageAt) >= h.quickFor || h.pause == nil || !h.pause(zkRoundPause(h.rounds)) {
		h.rounds = 0
		return server, true
	}
	return server, false
}

func (h *zkHosts) Connected() { h.tried, h.rounds = 0, 0 }

// zkQuickRetryFor is how long into an outage failed rounds of servers
// pause briefly instead of go-zookeeper's second: half the session (the
// part of it a reconnect can still save), at most 10 s.
func zkQuickRetryFor(sessionTimeout time.Duration) time.Duration {
	return min(sessionTimeout/2, 10*time.Second)
}

// sleep waits d unless the store closes first (then false).
func (s *zkStore) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

// zkRoundPause is the pause after the n-th failed round of an outage's
// first zkQuickRetryFor: 25 ms doubling to 200 ms, with up to a quarter
// more at random so that a cluster's clients do not all come back in the
// same instant after an election.
func zkRoundPause(n int) time.Duration {
	d := min(25*time.Millisecond<<min(n-1, 3), 200*time.Millisecond)
	return d + rand.N(d/4+1)
}
