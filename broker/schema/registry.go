package schema

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// maxPutAttempts bounds how often one put re-reads the history after
// losing the race for a version number to another broker.
const maxPutAttempts = 32

// Config configures a Registry.
type Config struct {
	// Store holds the histories (see the package doc for the layout).
	Store metadata.Store
	// DefaultStrategy is the broker's schemaCompatibilityStrategy;
	// Undefined means FULL, Pulsar's default.
	DefaultStrategy Strategy
	// NamespaceStrategy returns a namespace's schema_compatibility_strategy
	// (Undefined: use DefaultStrategy) and whether producers may register
	// new schemas (is_allow_auto_update_schema). Nil: defaults, auto
	// update allowed.
	NamespaceStrategy func(ctx context.Context, tenant, ns string) (s Strategy, allowAutoUpdate bool, err error)
	// TopicStrategy returns the topic's own schemaCompatibilityStrategy
	// policy (Undefined: none, its namespace's applies). Nil: none.
	TopicStrategy func(ctx context.Context, id ID) (Strategy, error)
	// Logger receives operator-facing events; nil discards them.
	Logger *slog.Logger
	// Now is the clock stamped on stored versions; nil means time.Now.
	Now func() time.Time
}

// Registry is the schema registry: per-topic schema histories in the
// metadata store, with Pulsar's compatibility rules. It keeps no state of
// its own beyond its configuration, so several brokers may share a store
// and it is safe for concurrent use.
type Registry struct {
	store           metadata.Store
	defaultStrategy Strategy
	nsStrategy      func(ctx context.Context, tenant, ns string) (Strategy, bool, error)
	topicStrategy   func(ctx context.Context, id ID) (Strategy, error)
	log             *slog.Logger
	now             func() time.Time
}

// New returns a registry over cfg.Store.
func New(cfg Config) (*Registry, error) {
	if cfg.Store == nil {
		return nil, errors.New("schema registry: Config.Store is required")
	}
	if !cfg.DefaultStrategy.valid() {
		return nil, fmt.Errorf("schema registry: unknown default strategy %s", cfg.DefaultStrategy)
	}
	r := &Registry{store: cfg.Store, defaultStrategy: cfg.DefaultStrategy, nsStrategy: cfg.NamespaceStrategy,
		topicStrategy: cfg.TopicStrategy, log: cfg.Logger, now: cfg.Now}
	if r.defaultStrategy == Undefined {
		r.defaultStrategy = Full
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// DefaultStrategy is the broker's strategy, in force where neither the
// topic nor its namespace has one.
func (r *Registry) DefaultStrategy() Strategy { return r.defaultStrategy }

// policy is the strategy and auto-update flag in force for a topic: its
// own strategy, else its namespace's, else the broker's.
func (r *Registry) policy(ctx context.Context, id ID) (Strategy, bool, error) {
	s, auto, err := r.namespacePolicy(ctx, id)
	if err != nil || r.topicStrategy == nil {
		return s, auto, err
	}
	own, err := r.topicStrategy(ctx, id)
	if err != nil {
		return 0, false, fmt.Errorf("schema %s: topic policy: %w", id, err)
	}
	if !own.valid() {
		return 0, false, fmt.Errorf("schema %s: topic policy: unknown strategy %s", id, own)
	}
	if own != Undefined {
		s = own
	}
	return s, auto, nil
}

// namespacePolicy is the strategy and auto-update flag in force for a
// topic's namespace.
func (r *Registry) namespacePolicy(ctx context.Context, id ID) (Strategy, bool, error) {
	if r.nsStrategy == nil {
		return r.defaultStrategy, true, nil
	}
	s, auto, err := r.nsStrategy(ctx, id.Tenant, id.Namespace)
	if err != nil {
		return 0, false, fmt.Errorf("schema %s: namespace policy: %w", id, err)
	}
	if !s.valid() {
		return 0, false, fmt.Errorf("schema %s: namespace policy: unknown strategy %s", id, s)
	}
	if s == Undefined {
		s = r.defaultStrategy
	}
	return s, auto, nil
}

// history parses topic and reads its versions.
func (r *Registry) history(ctx context.Context, topic string) (ID, []Version, error) {
	id, err := ParseID(topic)
	if err != nil {
		return ID{}, nil, err
	}
	h, err := r.read(ctx, id)
	return id, h, err
}

// read reads id's versions, reporting corruption to the operator: it
// blocks the topic's schema operations until the history is repaired or
// removed.
func (r *Registry) read(ctx context.Context, id ID) ([]Version, error) {
	h, err := readHistory(ctx, r.store, id)
	if errors.Is(err, ErrCorrupt) {
		r.log.Error("corrupt schema history", "schema", id.String(), "err", err)
	}
	return h, err
}

// GetLatest returns a topic's current schema; ErrNotFound when it has none
// or the latest version is a deletion.
func (r *Registry) GetLatest(ctx context.Context, topic string) (Version, error) {
	id, h, err := r.history(ctx, topic)
	if err != nil {
		return Version{}, err
	}
	if len(h) == 0 || h[len(h)-1].Deleted {
		return Version{}, fmt.Errorf("%w: topic %s has no schema", ErrNotFound, id)
	}
	return h[len(h)-1], nil
}

// GetVersion returns one version; ErrNotFound for versions that do not
// exist, are deletion markers, or precede the last deletion.
func (r *Registry) GetVersion(ctx context.Context, topic string, version int64) (Version, error) {
	id, h, err := r.history(ctx, topic)
	if err != nil {
		return Version{}, err
	}
	for _, v := range live(h) {
		if v.Version == version {
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("%w: topic %s has no schema version %d", ErrNotFound, id, version)
}

// GetAll returns the versions since the last deletion, oldest first
// (empty, not an error, when there are none).
func (r *Registry) GetAll(ctx context.Context, topic string) ([]Version, error) {
	_, h, err := r.history(ctx, topic)
	return live(h), err
}

// FindVersion returns the version holding a schema identical to info
// (type and data, as Pulsar compares them), or -1 when none does.
func (r *Registry) FindVersion(ctx context.Context, topic string, info Info) (int64, error) {
	_, h, err := r.history(ctx, topic)
	if err != nil {
		return -1, err
	}
	return findIdentical(live(h), info), nil
}

func findIdentical(live []Version, info Info) int64 {
	for _, v := range live {
		if sameSchema(v.Info, info) {
			return v.Version
		}
	}
	return -1
}

// PutIfCompatible is the producer's path (GET_OR_CREATE_SCHEMA, and the
// schema a PRODUCER command carries): it returns the version of an
// identical schema already registered since the last deletion, or checks
// the schema against the namespace's strategy and stores it as the next
// version. When the namespace disallows auto update, Pulsar refuses any
// schema not already registered, even on a topic with no schema yet: an
// admin must upload it (PutAdmin).
func (r *Registry) PutIfCompatible(ctx context.Context, topic string, info Info, user string) (int64, error) {
	return r.put(ctx, topic, info, user, true)
}

// PutAdmin is the admin upload (POST .../schema): as PutIfCompatible, but
// not subject to the auto-update setting.
func (r *Registry) PutAdmin(ctx context.Context, topic string, info Info, user string) (int64, error) {
	return r.put(ctx, topic, info, user, false)
}

func (r *Registry) put(ctx context.Context, topic string, info Info, user string, producer bool) (int64, error) {
	id, err := ParseID(topic)
	if err != nil {
		return -1, err
	}
	if err := validate(info); err != nil {
		return -1, fmt.Errorf("schema %s: %w", id, err)
	}
	strategy, auto, err := r.policy(ctx, id)
	if err != nil {
		return -1, err
	}
	for range maxPutAttempts {
		v, err := r.tryPut(ctx, id, info, user, strategy, auto || !producer)
		if !errors.Is(err, metadata.ErrExists) {
			return v, err
		}
	}
	return -1, fmt.Errorf("schema %s: lost the race for a version number %d times in a row", id, maxPutAttempts)
}

// tryPut makes one attempt; metadata.ErrExists means another writer took
// the version number first, and the caller re-reads and tries again.
func (r *Registry) tryPut(ctx context.Context, id ID, info Info, user string, s Strategy, mayAdd bool) (int64, error) {
	h, err := r.read(ctx, id)
	if err != nil {
		return -1, err
	}
	cur := live(h)
	if v := findIdentical(cur, info); v >= 0 {
		return v, nil
	}
	if !mayAdd {
		return -1, fmt.Errorf("schema %s: %w: schema not found and schema auto updating is disabled", id, ErrIncompatible)
	}
	if err := checkAgainst(producerTargets(cur, s), info, s); err != nil {
		r.log.Debug("schema refused", "schema", id.String(), "strategy", s.String(), "err", err)
		return -1, fmt.Errorf("schema %s: %w", id, err)
	}
	v := Version{Info: info.Clone(), Version: nextVersion(h), Timestamp: r.now(), User: user}
	if err := createVersion(ctx, r.store, id, v); err != nil {
		return -1, err
	}
	r.log.Info("schema version added", "schema", id.String(), "version", v.Version, "type", info.Type.String())
	return v.Version, nil
}

// CheckCompatibility tells whether PutAdmin would accept info, without
// storing it (the admin "compatibility" endpoint), and under which strategy.
func (r *Registry) CheckCompatibility(ctx context.Context, topic string, info Info) (Strategy, error) {
	id, h, err := r.history(ctx, topic)
	if err != nil {
		return Undefined, err
	}
	s, _, err := r.policy(ctx, id)
	if err != nil {
		return Undefined, err
	}
	if err := validate(info); err != nil {
		return s, fmt.Errorf("schema %s: %w", id, err)
	}
	cur := live(h)
	if findIdentical(cur, info) >= 0 {
		return s, nil
	}
	if err := checkAgainst(producerTargets(cur, s), info, s); err != nil {
		return s, fmt.Errorf("schema %s: %w", id, err)
	}
	return s, nil
}

// CheckConsumerCompatibility checks a subscribing consumer's schema: it
// must read what the topic's producers write (see consumerCheck).
// ErrNotFound when the topic has no schema: the broker then decides, as
// Pulsar's addSchemaIfIdleOrCheckCompatible, whether to register it.
func (r *Registry) CheckConsumerCompatibility(ctx context.Context, topic string, info Info) error {
	id, h, err := r.history(ctx, topic)
	if err != nil {
		return err
	}
	s, _, err := r.policy(ctx, id)
	if err != nil {
		return err
	}
	if info.Type != AutoConsume {
		if err := validate(info); err != nil {
			return fmt.Errorf("schema %s: %w", id, err)
		}
	}
	if err := consumerCheck(live(h), info, s); err != nil {
		return fmt.Errorf("schema %s: consumer: %w", id, err)
	}
	return nil
}

// Delete soft-deletes a topic's schema by storing a deletion marker, as
// Pulsar does: readers see no schema, and the next schema starts a fresh
// history (version numbers keep counting). It returns the marker's
// version, or -1 when there was no schema to delete.
func (r *Registry) Delete(ctx context.Context, topic, user string) (int64, error) {
	id, err := ParseID(topic)
	if err != nil {
		return -1, err
	}
	for range maxPutAttempts {
		h, err := r.read(ctx, id)
		if err != nil {
			return -1, err
		}
		if len(h) == 0 || h[len(h)-1].Deleted {
			return -1, nil
		}
		marker := Version{Info: Info{Type: None}, Version: nextVersion(h), Timestamp: r.now(), User: user, Deleted: true}
		err = createVersion(ctx, r.store, id, marker)
		if errors.Is(err, metadata.ErrExists) {
			continue
		}
		if err == nil {
			r.log.Info("schema deleted", "schema", id.String(), "version", marker.Version)
		}
		return marker.Version, err
	}
	return -1, fmt.Errorf("schema %s: lost the race for a version number %d times in a row", id, maxPutAttempts)
}

// HardDelete removes a topic's whole schema history from the store (topic
// deletion, and the admin DELETE with force=true). It returns the last
// version removed, or -1 when there was none.
func (r *Registry) HardDelete(ctx context.Context, topic string) (int64, error) {
	id, h, err := r.history(ctx, topic)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return -1, err // a corrupt history may still be removed
	}
	if err := removeHistory(ctx, r.store, id); err != nil {
		return -1, err
	}
	last := int64(-1)
	if len(h) > 0 {
		last = h[len(h)-1].Version
	}
	r.log.Info("schema history removed", "schema", id.String(), "last_version", last)
	return last, nil
}
