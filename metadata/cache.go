package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Cache is a typed, read-through cache over one subtree of a Store, like
// Pulsar's MetadataCache: values are JSON-encoded T, reads are served from
// memory after the first, and a watch on the subtree invalidates entries as
// they change (from this process or any other).
//
// Lock rules: mu guards entries. Store calls are made without mu held.
type Cache[T any] struct {
	store  Store
	prefix string

	opts CacheOptions
	// session tells rewatch of a reconnection (retry at once) and of a
	// lost session (stale entries dropped at once); nil unless
	// StaleWhileDisconnected.
	session *SessionWatcher

	mu      sync.Mutex
	watch   *Watcher                 // the current watch; replaced after an interruption
	entries map[string]cacheEntry[T] // nil while no watch is established: reads go to the store
	// stale: the watch was interrupted (the connection went) and entries
	// are still served (StaleWhileDisconnected) until it is set up again.
	stale  bool
	gen    map[string]uint64 // bumped on invalidation: a racing fill never resurrects stale data
	epoch  uint64            // bumped when a watch ends: fills from before it are dropped
	closed bool
	stop   chan struct{}
	done   chan struct{}
	// state is the count of changes to entries other than fills, shifted
	// left by one, | 1 while entries are kept (Version reads it without
	// mu; changedLocked writes it under mu).
	state atomic.Uint64
}

type cacheEntry[T any] struct {
	value T
	stat  Stat
	found bool
}

// maxCASRetries bounds ReadModifyUpdate under constant contention.
const maxCASRetries = 100

// ErrCASRetriesExhausted is returned when ReadModifyUpdate kept losing races.
var ErrCASRetriesExhausted = errors.New("metadata: too many concurrent updates, gave up")

// CacheOptions tune a Cache.
type CacheOptions struct {
	// StaleWhileDisconnected keeps serving cached entries while the
	// connection to the store is down (the watch interrupted, the session
	// not lost), as Pulsar's metadata caches do, instead of reading
	// through to a store that cannot answer: for values a hot path reads
	// (policies), where a value as old as the disconnection beats a wait
	// for the store. Entries are dropped once the watch is set up again,
	// since changes may have been missed. Not for ownership.
	StaleWhileDisconnected bool
}

// NewCache watches prefix and returns a cache of the nodes under it.
func NewCache[T any](ctx context.Context, store Store, prefix string) (*Cache[T], error) {
	return NewCacheWith[T](ctx, store, prefix, CacheOptions{})
}

// NewCacheWith is NewCache with options.
func NewCacheWith[T any](ctx context.Context, store Store, prefix string, opts CacheOptions) (*Cache[T], error) {
	w, err := store.Watch(ctx, prefix)
	if err != nil {
		return nil, err
	}
	c := &Cache[T]{store: store, prefix: prefix, opts: opts, watch: w, entries: map[string]cacheEntry[T]{},
		gen: map[string]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	c.changedLocked()
	if opts.StaleWhileDisconnected {
		c.session = store.SessionEvents()
	}
	go c.run(w)
	return c, nil
}

// run applies invalidations and, when a watch ends because the connection
// was lost or the watcher fell behind, watches again: changes missed
// meanwhile are covered by dropping every entry.
func (c *Cache[T]) run(w *Watcher) {
	defer close(c.done)
	for {
		c.invalidate(w)
		if !c.resumable(w.Err()) {
			return
		}
		if w = c.rewatch(); w == nil {
			return
		}
	}
}

func (c *Cache[T]) invalidate(w *Watcher) {
	for ev := range w.Events() {
		c.mu.Lock()
		delete(c.entries, ev.Path)
		c.gen[ev.Path]++
		c.changedLocked()
		c.mu.Unlock()
	}
	// No read may be served from entries nobody invalidates any more,
	// except, when asked, while only the connection is gone: then they
	// are as old as the disconnection, and dropped once it is back.
	c.mu.Lock()
	// A compacted etcd watch missed changes for certain: not served.
	if c.opts.StaleWhileDisconnected && errors.Is(w.Err(), ErrWatchInterrupted) && !errors.Is(w.Err(), ErrWatchCompacted) &&
		c.entries != nil {
		c.stale = true
	} else {
		c.entries = nil
	}
	c.epoch++
	c.changedLocked()
	c.mu.Unlock()
}

// changedLocked notes a change of entries (Version).
func (c *Cache[T]) changedLocked() {
	live := uint64(0)
	if c.entries != nil {
		live = 1
	}
	c.state.Store((c.state.Load()>>1+1)<<1 | live)
}

// Version identifies what the cache holds: while it returns the same v
// with live true, no entry was invalidated, so a value a caller read from
// the cache after taking v is still what Get would return, and the caller
// may keep it instead of asking again (a topic's own policies, read on
// every publish and every second). live is false while reads go to the
// store (no watch: nothing may be kept then). Any change under the prefix
// changes v.
func (c *Cache[T]) Version() (v uint64, live bool) {
	s := c.state.Load()
	return s >> 1, s&1 == 1
}

// sessionStates is the session's stream, or nil (never ready).
func (c *Cache[T]) sessionStates() <-chan SessionState {
	if c.session == nil {
		return nil
	}
	return c.session.States()
}

// dropStale stops serving entries nobody invalidates.
func (c *Cache[T]) dropStale() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale {
		c.entries, c.stale = nil, false
		c.epoch++
		c.changedLocked()
	}
}

// disconnected reports whether entries are being served stale.
func (c *Cache[T]) disconnected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stale
}

// resumable reports whether a watch that ended with err can be set up
// again (not after Close, session loss or the store's end).
func (c *Cache[T]) resumable(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && (errors.Is(err, ErrWatchInterrupted) || errors.Is(err, ErrWatchOverflow))
}

// rewatch retries Watch with backoff until it works or the cache closes.
func (c *Cache[T]) rewatch() *Watcher {
	delay := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w, err := c.store.Watch(ctx, c.prefix)
		cancel()
		if err == nil {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.closed {
				w.Close()
				return nil
			}
			// Fresh entries: fills begun before this (epoch) and stale
			// entries (changes may have been missed) are not kept.
			c.watch, c.entries, c.stale = w, map[string]cacheEntry[T]{}, false
			c.epoch++
			c.changedLocked()
			return w
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrSessionLost) {
			c.dropStale()
			return nil
		}
		select {
		case <-c.stop:
			return nil
		case <-time.After(delay):
			delay = min(2*delay, 5*time.Second)
		case st, ok := <-c.sessionStates():
			switch {
			case !ok:
				c.session = nil // ended (overflow): back to the backoff alone
			case st == SessionLost:
				c.dropStale()
			case st == SessionReconnected || st == SessionConnected:
				delay = 50 * time.Millisecond // watch again now, not after the backoff
			}
		}
	}
}

// Get returns the decoded value at path; found is false when the node does
// not exist (absence is cached too).
func (c *Cache[T]) Get(ctx context.Context, path string) (value T, stat Stat, found bool, err error) {
	return c.get(ctx, path, false)
}

// GetFresh is Get that never answers from entries served stale while
// disconnected (StaleWhileDisconnected): for reads a decision other
// processes must agree with is made from (a namespace's bundle
// boundaries, from which bundle ownership is acquired).
func (c *Cache[T]) GetFresh(ctx context.Context, path string) (value T, stat Stat, found bool, err error) {
	return c.get(ctx, path, true)
}

func (c *Cache[T]) get(ctx context.Context, path string, fresh bool) (value T, stat Stat, found bool, err error) {
	if !underPrefix(path, c.prefix) {
		return value, stat, false, fmt.Errorf("metadata cache %s: path %s is outside it", c.prefix, path)
	}
	c.mu.Lock()
	if e, hit := c.entries[path]; hit && !(fresh && c.stale) {
		c.mu.Unlock()
		return e.value, e.stat, e.found, nil
	}
	gen, epoch, live := c.gen[path], c.epoch, c.entries != nil
	c.mu.Unlock()
	return c.fill(ctx, path, gen, epoch, live)
}

// fill reads path from the store and caches it unless an invalidation
// (gen) or a new watch (epoch) came meanwhile. Apart from get so that the
// entry it decodes into (whose address the decoder takes, so it lives on
// the heap) is not allocated on every cache hit too.
func (c *Cache[T]) fill(ctx context.Context, path string, gen, epoch uint64, live bool) (value T, stat Stat, found bool, err error) {
	var e cacheEntry[T]
	raw, stat, err := c.store.Get(ctx, path)
	switch {
	case errors.Is(err, ErrNotFound):
		e = cacheEntry[T]{}
	case err != nil:
		return value, stat, false, err
	default:
		if err := json.Unmarshal(raw, &e.value); err != nil {
			return value, stat, false, fmt.Errorf("metadata cache: decode %s: %w", path, err)
		}
		e.stat, e.found = stat, true
	}
	c.mu.Lock()
	if live && c.entries != nil && c.gen[path] == gen && c.epoch == epoch {
		c.entries[path] = e
	}
	c.mu.Unlock()
	return e.value, e.stat, e.found, nil
}

// Invalidate drops path's entry, so the next read goes to the store: a
// process that wrote path itself calls it to read its own write at once
// (an admin call that sets a policy, then the broker acting on it) instead
// of when the watch's event arrives. A read racing with it is not cached.
func (c *Cache[T]) Invalidate(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		return
	}
	delete(c.entries, path)
	c.gen[path]++
	c.changedLocked()
}

// ReadModifyUpdate applies modify to the current value (found=false when
// absent) and writes the result with compare-and-set, retrying from a fresh
// read on version conflicts. It returns the value written, which this
// cache's next read sees.
func (c *Cache[T]) ReadModifyUpdate(ctx context.Context, path string, modify func(cur T, found bool) (T, error)) (T, error) {
	var zero T
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		raw, stat, err := c.store.Get(ctx, path)
		var cur T
		found := err == nil
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return zero, err
		default:
			if err := json.Unmarshal(raw, &cur); err != nil {
				return zero, fmt.Errorf("metadata cache: decode %s: %w", path, err)
			}
		}
		next, err := modify(cur, found)
		if err != nil {
			return zero, err
		}
		enc, err := json.Marshal(next)
		if err != nil {
			return zero, fmt.Errorf("metadata cache: encode %s: %w", path, err)
		}
		if found {
			_, err = c.store.Put(ctx, path, enc, stat.Version)
		} else {
			_, _, err = c.store.Create(ctx, path, enc, CreateOptions{})
		}
		if errors.Is(err, ErrBadVersion) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
			continue // someone else changed it first: read again
		}
		if err != nil {
			return zero, err
		}
		c.Invalidate(path)
		return next, nil
	}
	return zero, fmt.Errorf("metadata cache %s: %w after %d attempts", path, ErrCASRetriesExhausted, maxCASRetries)
}

// Close stops watching.
func (c *Cache[T]) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	w := c.watch
	close(c.stop)
	// Nobody invalidates entries any more: reads go to the store.
	c.entries, c.stale = nil, false
	c.epoch++
	c.changedLocked()
	c.mu.Unlock()
	w.Close()
	<-c.done
}
