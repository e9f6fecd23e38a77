package faultstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// Store is a metadata.Store that injects faults into another.
//
// Lock rules: mu guards the stale-read records only; it is never held
// across a call to the wrapped store or a delay.
type Store struct {
	inner metadata.Store
	inj   Injector
	ops   atomic.Int64

	mu struct {
		sync.Mutex
		// nodes holds, per path written through the wrapper, the node as
		// a read just before that write saw it: what a Stale read
		// answers. kids indexes those paths by parent, so a Stale
		// Children undoes the creates and deletes made through the
		// wrapper (without listing the parent on every write).
		nodes map[string]staleNode
		kids  map[string]map[string]struct{}
	}
}

type staleNode struct {
	exists bool
	value  []byte
	stat   metadata.Stat
}

// Wrap returns inner wrapped with the injector.
func Wrap(inner metadata.Store, inj Injector) *Store {
	s := &Store{inner: inner, inj: inj}
	s.mu.nodes, s.mu.kids = map[string]staleNode{}, map[string]map[string]struct{}{}
	return s
}

// Ops returns how many operations have been attempted so far.
func (s *Store) Ops() int64 { return s.ops.Load() }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() metadata.Store { return s.inner }

// check counts the operation, applies its delay and returns its fault.
// A fault's error is returned when it fails the operation (or the
// context ended during the delay).
func (s *Store) check(ctx context.Context, op Op, path string) (Fault, error) {
	idx := s.ops.Add(1) - 1
	fault, ok := s.inj.Inject(op, path, idx)
	if !ok {
		return Fault{}, nil
	}
	if fault.Delay > 0 {
		t := time.NewTimer(fault.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fault, fmt.Errorf("metadata %s %s: %w", op, path, ctx.Err())
		}
	}
	if fault.Fail {
		return fault, &InjectedError{Op: op, Path: path, Index: idx, Err: fault.Err}
	}
	return fault, nil
}

// noteWrite records the node at path as it is before a write, for Stale
// reads. Concurrent writes to one path may record any value the node had
// before the last of them: still stale.
func (s *Store) noteWrite(ctx context.Context, path string) {
	v, st, err := s.inner.Get(ctx, path)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return // unknown: leave the last record
	}
	parent := parentOf(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.nodes[path] = staleNode{exists: err == nil, value: v, stat: st}
	if s.mu.kids[parent] == nil {
		s.mu.kids[parent] = map[string]struct{}{}
	}
	s.mu.kids[parent][path] = struct{}{}
}

func parentOf(path string) string {
	for i := len(path) - 1; i > 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return "/"
}

func (s *Store) staleNode(path string) (staleNode, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.mu.nodes[path]
	return n, ok
}

// staleChildren turns the current children of path into those before
// the writes made through the wrapper: nodes it created are left out,
// nodes it deleted are back. ok is false when none were made.
func (s *Store) staleChildren(path string, now []string) (kids []string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	written := s.mu.kids[path]
	if len(written) == 0 {
		return nil, false
	}
	set := map[string]bool{}
	for _, k := range now {
		set[k] = true
	}
	for p := range written {
		set[p[strings.LastIndexByte(p, '/')+1:]] = s.mu.nodes[p].exists
	}
	for k, exists := range set {
		if exists {
			kids = append(kids, k)
		}
	}
	slices.Sort(kids)
	return kids, true
}

func notFound(op, path string) error {
	return fmt.Errorf("metadata %s %s: %w", op, path, metadata.ErrNotFound)
}

// Get implements metadata.Store.
func (s *Store) Get(ctx context.Context, path string) ([]byte, metadata.Stat, error) {
	fault, err := s.check(ctx, OpGet, path)
	if err != nil {
		return nil, metadata.Stat{}, err
	}
	if n, ok := s.staleNode(path); fault.Stale && ok {
		if !n.exists {
			return nil, metadata.Stat{}, notFound("get", path)
		}
		return append([]byte(nil), n.value...), n.stat, nil
	}
	return s.inner.Get(ctx, path)
}

// Exists implements metadata.Store.
func (s *Store) Exists(ctx context.Context, path string) (bool, metadata.Stat, error) {
	fault, err := s.check(ctx, OpExists, path)
	if err != nil {
		return false, metadata.Stat{}, err
	}
	if n, ok := s.staleNode(path); fault.Stale && ok {
		return n.exists, n.stat, nil
	}
	return s.inner.Exists(ctx, path)
}

// Children implements metadata.Store.
func (s *Store) Children(ctx context.Context, path string) ([]string, error) {
	fault, err := s.check(ctx, OpChildren, path)
	if err != nil {
		return nil, err
	}
	kids, err := s.inner.Children(ctx, path)
	if err != nil || !fault.Stale {
		return kids, err
	}
	if old, ok := s.staleChildren(path, kids); ok {
		return old, nil
	}
	return kids, nil
}

// Put implements metadata.Store.
func (s *Store) Put(ctx context.Context, path string, value []byte, expectedVersion int64) (metadata.Stat, error) {
	if _, err := s.check(ctx, OpPut, path); err != nil {
		return metadata.Stat{}, err
	}
	s.noteWrite(ctx, path)
	return s.inner.Put(ctx, path, value, expectedVersion)
}

// Create implements metadata.Store.
func (s *Store) Create(ctx context.Context, path string, value []byte, opts metadata.CreateOptions) (string, metadata.Stat, error) {
	if _, err := s.check(ctx, OpCreate, path); err != nil {
		return "", metadata.Stat{}, err
	}
	if !opts.Sequential { // a sequential node's path is known only after
		s.noteWrite(ctx, path)
	}
	return s.inner.Create(ctx, path, value, opts)
}

// Delete implements metadata.Store.
func (s *Store) Delete(ctx context.Context, path string, expectedVersion int64) error {
	if _, err := s.check(ctx, OpDelete, path); err != nil {
		return err
	}
	s.noteWrite(ctx, path)
	return s.inner.Delete(ctx, path, expectedVersion)
}

// Watch implements metadata.Store (delays and failures only).
func (s *Store) Watch(ctx context.Context, prefix string) (*metadata.Watcher, error) {
	if _, err := s.check(ctx, OpWatch, prefix); err != nil {
		return nil, err
	}
	return s.inner.Watch(ctx, prefix)
}

// SessionEvents implements metadata.Store (never injected).
func (s *Store) SessionEvents() *metadata.SessionWatcher { return s.inner.SessionEvents() }

// Close implements metadata.Store (never injected: tests always need to
// clean up).
func (s *Store) Close() error { return s.inner.Close() }

var _ metadata.Store = (*Store)(nil)
