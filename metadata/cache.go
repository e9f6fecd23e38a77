package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
	watch  *Watcher

	mu      sync.Mutex
	entries map[string]cacheEntry[T]
	gen     map[string]uint64 // bumped on invalidation: a racing fill never resurrects stale data
	done    chan struct{}
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

// NewCache watches prefix and returns a cache of the nodes under it.
func NewCache[T any](ctx context.Context, store Store, prefix string) (*Cache[T], error) {
	w, err := store.Watch(ctx, prefix)
	if err != nil {
		return nil, err
	}
	c := &Cache[T]{store: store, prefix: prefix, watch: w, entries: map[string]cacheEntry[T]{},
		gen: map[string]uint64{}, done: make(chan struct{})}
	go c.invalidate()
	return c, nil
}

func (c *Cache[T]) invalidate() {
	defer close(c.done)
	for ev := range c.watch.Events() {
		c.mu.Lock()
		delete(c.entries, ev.Path)
		c.gen[ev.Path]++
		c.mu.Unlock()
	}
	// The watch ended (overflow, session lost, close): drop everything so
	// that no read is served from entries nobody invalidates any more.
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}

// Get returns the decoded value at path; found is false when the node does
// not exist (absence is cached too).
func (c *Cache[T]) Get(ctx context.Context, path string) (value T, stat Stat, found bool, err error) {
	if !underPrefix(path, c.prefix) {
		return value, stat, false, fmt.Errorf("metadata cache %s: path %s is outside it", c.prefix, path)
	}
	c.mu.Lock()
	e, hit := c.entries[path]
	gen, live := c.gen[path], c.entries != nil
	c.mu.Unlock()
	if hit {
		return e.value, e.stat, e.found, nil
	}
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
	if live && c.entries != nil && c.gen[path] == gen {
		c.entries[path] = e
	}
	c.mu.Unlock()
	return e.value, e.stat, e.found, nil
}

// ReadModifyUpdate applies modify to the current value (found=false when
// absent) and writes the result with compare-and-set, retrying from a fresh
// read on version conflicts. It returns the value written.
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
		return next, nil
	}
	return zero, fmt.Errorf("metadata cache %s: %w after %d attempts", path, ErrCASRetriesExhausted, maxCASRetries)
}

// Close stops watching.
func (c *Cache[T]) Close() {
	c.watch.Close()
	<-c.done
}
