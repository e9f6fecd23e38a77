package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/magnetar-io/magnetar/metadata"
)

// Roots of the configuration-store tree, as Pulsar lays it out.
const (
	clustersRoot    = "/admin/clusters"
	policiesRoot    = "/admin/policies"
	partitionedRoot = "/admin/partitioned-topics"
)

// maxCASAttempts bounds a read-modify-write under constant contention;
// each failed attempt means another writer made progress.
const maxCASAttempts = 100

// Options tune New. Zero values take Pulsar's defaults.
type Options struct {
	// DefaultNumberOfBundles is given to namespaces created without
	// bundles (Pulsar's defaultNumberOfNamespaceBundles; default 4).
	DefaultNumberOfBundles int
	// Logger receives what an operator should know (failed clean-ups).
	Logger *slog.Logger
}

// Resources is typed access to clusters, tenants, namespaces and
// partitioned topics in a configuration store. It is safe for concurrent
// use; writes are compare-and-set on node versions, so several brokers
// (or Pulsar's own tools) may write at once.
type Resources struct {
	store          metadata.Store
	defaultBundles int
	log            *slog.Logger
	policies       *metadata.Cache[Policies] // namespace policies, invalidated by a watch
	topicPolicies  *metadata.Cache[TopicPolicies]
}

// New returns Resources over store, watching namespace policies for the
// cache. Close releases the watch.
func New(ctx context.Context, store metadata.Store, opts Options) (*Resources, error) {
	n := opts.DefaultNumberOfBundles
	if n == 0 {
		n = DefaultNumberOfNamespaceBundles
	}
	if n < 1 || n > MaxBundles {
		return nil, fmt.Errorf("resources: default number of bundles must be between 1 and %d, got %d", MaxBundles, n)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Policies are read on the publish path (a topic's maxMessageSize,
	// rates): while the metadata store is unreachable they are served as
	// they were, not waited for.
	stale := metadata.CacheOptions{StaleWhileDisconnected: true}
	cache, err := metadata.NewCacheWith[Policies](ctx, store, policiesRoot, stale)
	if err != nil {
		return nil, fmt.Errorf("resources: watch %s: %w", policiesRoot, err)
	}
	topicCache, err := metadata.NewCacheWith[TopicPolicies](ctx, store, topicPoliciesRoot, stale)
	if err != nil {
		cache.Close()
		return nil, fmt.Errorf("resources: watch %s: %w", topicPoliciesRoot, err)
	}
	return &Resources{store: store, defaultBundles: n, log: log, policies: cache, topicPolicies: topicCache}, nil
}

// Close stops the policies caches' watches.
func (r *Resources) Close() {
	r.policies.Close()
	r.topicPolicies.Close()
}

// getJSON reads and decodes the node at path; what names it in errors.
func getJSON[T any](ctx context.Context, s metadata.Store, path, what string) (T, metadata.Stat, error) {
	var v T
	raw, stat, err := s.Get(ctx, path)
	if errors.Is(err, metadata.ErrNotFound) {
		return v, stat, notFound(what)
	}
	if err != nil {
		return v, stat, fmt.Errorf("read %s: %w", what, err)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, stat, fmt.Errorf("%s at %s: %w: %v", what, path, ErrCorrupt, err)
	}
	return v, stat, nil
}

// createJSON creates the node at path holding v.
func createJSON(ctx context.Context, s metadata.Store, path, what string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	_, _, err = s.Create(ctx, path, raw, metadata.CreateOptions{})
	if errors.Is(err, metadata.ErrExists) {
		return exists(what)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}

// updateJSON reads the node at path, lets apply change (and validate) the
// value, and writes it back if the node's version has not moved; on a
// conflict it starts again from a fresh read. apply sees a private copy,
// and nothing is written when it fails, so an update is all or nothing.
func updateJSON[T any](ctx context.Context, s metadata.Store, path, what string, apply func(*T) error) (T, error) {
	var zero T
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		cur, stat, err := getJSON[T](ctx, s, path, what)
		if err != nil {
			return zero, err
		}
		if err := apply(&cur); err != nil {
			return zero, err
		}
		raw, err := json.Marshal(&cur)
		if err != nil {
			return zero, fmt.Errorf("encode %s: %w", what, err)
		}
		_, err = s.Put(ctx, path, raw, stat.Version)
		if errors.Is(err, metadata.ErrBadVersion) || errors.Is(err, metadata.ErrNotFound) {
			continue // changed or deleted since the read: the next read decides
		}
		if err != nil {
			return zero, fmt.Errorf("write %s: %w", what, err)
		}
		return cur, nil
	}
	return zero, fmt.Errorf("update %s: %w (gave up after %d attempts)", what, ErrConflict, maxCASAttempts)
}

// children lists a node's children; a missing node has none.
// nodeExists reports whether the node of what exists.
func nodeExists(ctx context.Context, s metadata.Store, path, what string) (bool, error) {
	ok, _, err := s.Exists(ctx, path)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", what, err)
	}
	return ok, nil
}

func children(ctx context.Context, s metadata.Store, path string) ([]string, error) {
	names, err := s.Children(ctx, path)
	if errors.Is(err, metadata.ErrNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, err)
	}
	return names, nil
}

// deleteIfEmpty removes a path node if it exists and has no children: the
// empty parents the store made for nodes now gone. Failure only leaves an
// empty node behind, so it is logged, not returned.
func (r *Resources) deleteIfEmpty(ctx context.Context, path string) {
	err := r.store.Delete(ctx, path, metadata.AnyVersion)
	if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrNotEmpty) {
		return
	}
	r.log.Warn("resources: could not remove an empty metadata node", "path", path, "err", err)
}
