package managedledger

import (
	"github.com/magnetar-io/magnetar/internal/stage"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger/offload"
	"github.com/magnetar-io/magnetar/metadata"
)

// Config configures the managed ledgers of a BKFactory. Zero values take
// the defaults; names in parentheses are Pulsar's broker settings.
type Config struct {
	// Stages, when set, records each add's ml_queue and storage_add
	// stages (internal/stage).
	Stages *stage.Recorder
	// Store holds managed-ledger and cursor metadata (required).
	Store metadata.Store
	// Ledgers writes and reads the ledgers (required).
	Ledgers *ledger.Client
	// EnsembleSize, WriteQuorum, AckQuorum (managedLedgerDefaultEnsembleSize,
	// ...WriteQuorum, ...AckQuorum; default 1, 1, 1: standalone).
	EnsembleSize, WriteQuorum, AckQuorum int
	// MaxEntriesPerLedger (managedLedgerMaxEntriesPerLedger; default 50000).
	MaxEntriesPerLedger int64
	// MaxSizePerLedger (managedLedgerMaxSizePerLedgerMbytes; default 2 GiB).
	MaxSizePerLedger int64
	// MaxLedgerRolloverTime (managedLedgerMaxLedgerRolloverTimeMinutes;
	// default 4 h) and MinLedgerRolloverTime (...MinLedgerRolloverTimeMinutes;
	// default 10 min): a ledger rolls over after the maximum age, and not
	// before the minimum one for the size and entry limits.
	MaxLedgerRolloverTime, MinLedgerRolloverTime time.Duration
	// CacheSize bounds the entry cache shared by every managed ledger of
	// the factory (managedLedgerCacheSizeMB; default 256 MiB).
	CacheSize int64
	// CacheEvictionTime drops cached entries older than this
	// (managedLedgerCacheEvictionTimeThresholdMillis; default 1 s... a
	// tailing read takes an entry long before that).
	CacheEvictionTime time.Duration
	// CacheEvictionWatermark (managedLedgerCacheEvictionWatermark; default
	// 0.9): once the cache is over its size it is evicted down to this
	// fraction of it, so eviction runs in steps, not on every add.
	CacheEvictionWatermark float64
	// MarkDeleteRate persists each cursor's position at most this many
	// times a second (managedLedgerDefaultMarkDeleteRateLimit; default 1).
	MarkDeleteRate float64
	// Retention is every managed ledger's retention until SetRetention
	// (defaultRetentionTimeInMinutes, defaultRetentionSizeInMB; default
	// zero: delete ledgers once consumed).
	Retention Retention
	// FailureBackoff and FailureBackoffMax pace new ledgers while writes
	// keep failing (a full disk): the first rollover after a failure is
	// immediate, each further one waits twice as long as the last, from
	// FailureBackoff up to FailureBackoffMax, jittered (default 100 ms,
	// 5 s). See bk_backoff.go.
	FailureBackoff, FailureBackoffMax time.Duration
	// CloseTimeout bounds how long Close waits for storage: the cursor
	// snapshots it writes and the adds still pending (default 2 s). A
	// bookie gone silent holds each add to it until the ledger client's
	// add timeout (10 s) and an ensemble change; an unload (load
	// shedding, an admin, a graceful stop) must not hold the topic's
	// clients that long. Past it the adds still pending fail (never
	// acknowledged: their producers resend) and the ledgers are left for
	// the next owner's recovery, which fences and closes them; a cursor
	// snapshot not written leaves the cursor at its last one that was
	// (acknowledgements since are delivered again, as after a crash).
	CloseTimeout time.Duration
	// Password of every ledger (managedLedgerPassword; default empty).
	Password []byte
	// LedgerPolicy, if set, is asked before each ledger (data or cursor)
	// of the named managed ledger is created, and for the mark-delete
	// rate when it opens: a namespace's persistence policies and bookie
	// affinity groups. Zero fields keep the defaults above; an error fails
	// the ledger's creation (retried as any failed creation is): falling
	// back to the defaults could give a namespace weaker replication than
	// it asks for.
	LedgerPolicy func(ctx context.Context, name string) (LedgerPolicy, error)
	// Offload, if set, lets closed ledgers go to tiered storage
	// (bk_offload.go): the default driver (managedLedgerOffloadDriver) and
	// the offloaders' settings (the filesystem driver's root).
	Offload *OffloadConfig
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// OffloadConfig configures tiered storage.
type OffloadConfig struct {
	Driver string
	Config offload.Config
	// Wrap, if set, wraps each offloader built (tests inject faults).
	Wrap func(offload.Offloader) offload.Offloader
}

// LedgerPolicy overrides the factory's ledger settings for one managed
// ledger (Pulsar's PersistencePolicies and BookieAffinityGroupData).
type LedgerPolicy struct {
	EnsembleSize, WriteQuorum, AckQuorum int
	BookieGroups                         []string
	// MarkDeleteRate (managedLedgerMaxMarkDeleteRate) replaces
	// Config.MarkDeleteRate when positive; it is read when the managed
	// ledger opens (a topic load), as Pulsar does.
	MarkDeleteRate float64
}

// ledgerOptions are the create options of ml's next ledger: the
// factory's settings, overridden by Config.LedgerPolicy.
func (c Config) ledgerOptions(ctx context.Context, name string, custom map[string][]byte) (ledger.CreateOptions, error) {
	o := ledger.CreateOptions{EnsembleSize: c.EnsembleSize, WriteQuorumSize: c.WriteQuorum, AckQuorumSize: c.AckQuorum,
		Password: c.Password, Custom: custom}
	if c.LedgerPolicy == nil {
		return o, nil
	}
	p, err := c.LedgerPolicy(ctx, name)
	if err != nil {
		return o, fmt.Errorf("read the namespace's persistence policy: %w", err)
	}
	if p.EnsembleSize > 0 && p.WriteQuorum > 0 && p.AckQuorum > 0 {
		o.EnsembleSize, o.WriteQuorumSize, o.AckQuorumSize = p.EnsembleSize, p.WriteQuorum, p.AckQuorum
	}
	o.BookieGroups = p.BookieGroups
	return o, nil
}

func (c Config) withDefaults() Config {
	if c.EnsembleSize <= 0 {
		c.EnsembleSize, c.WriteQuorum, c.AckQuorum = 1, 1, 1
	}
	if c.WriteQuorum <= 0 {
		c.WriteQuorum = c.EnsembleSize
	}
	if c.AckQuorum <= 0 {
		c.AckQuorum = c.WriteQuorum
	}
	if c.MaxEntriesPerLedger <= 0 {
		c.MaxEntriesPerLedger = 50000
	}
	if c.MaxSizePerLedger <= 0 {
		c.MaxSizePerLedger = 2 << 30
	}
	if c.MaxLedgerRolloverTime <= 0 {
		c.MaxLedgerRolloverTime = 4 * time.Hour
	}
	if c.MinLedgerRolloverTime <= 0 {
		c.MinLedgerRolloverTime = 10 * time.Minute
	}
	if c.CacheSize <= 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.CacheEvictionWatermark <= 0 || c.CacheEvictionWatermark > 1 {
		c.CacheEvictionWatermark = 0.9
	}
	if c.CacheEvictionTime <= 0 {
		c.CacheEvictionTime = time.Second
	}
	if c.MarkDeleteRate <= 0 {
		c.MarkDeleteRate = 1
	}
	if c.FailureBackoff <= 0 {
		c.FailureBackoff = 100 * time.Millisecond
	}
	if c.FailureBackoffMax < c.FailureBackoff {
		c.FailureBackoffMax = max(5*time.Second, c.FailureBackoff)
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// DefaultCacheSize is managedLedgerCacheSizeMB's default (256 MiB).
const DefaultCacheSize = 256 << 20

// ManagedLedgersPath is the root of managed-ledger metadata: one node per
// managed ledger (named by the topic) with a child per durable cursor.
const ManagedLedgersPath = "/managed-ledgers"

// BKFactory opens managed ledgers stored in ledgers (the implementation
// over the ledger client).
type BKFactory struct {
	cfg    Config
	log    *slog.Logger
	cache  *entryCache
	nextID atomic.Uint64

	mu      sync.Mutex
	open    map[string]*bkLedger
	opening map[string]chan struct{} // opens and closes in progress: closed when done
	// offloaders are built on first use, by driver (bk_offload.go).
	offloaders map[string]offload.Offloader
}

// NewBKFactory returns a factory; Store and Ledgers are required.
func NewBKFactory(cfg Config) (*BKFactory, error) {
	if cfg.Store == nil || cfg.Ledgers == nil {
		return nil, errors.New("managedledger: Config.Store and Config.Ledgers are required")
	}
	cfg = cfg.withDefaults()
	return &BKFactory{cfg: cfg, log: cfg.Logger, cache: newEntryCache(cfg.CacheSize, cfg.CacheEvictionTime, cfg.CacheEvictionWatermark),
		open: map[string]*bkLedger{}, opening: map[string]chan struct{}{}}, nil
}

// mlMetadata is a managed ledger's node (JSON).
type mlMetadata struct {
	Ledgers    []ledgerMeta      `json:"ledgers"`
	Properties map[string]string `json:"properties,omitempty"`
	Terminated *Position         `json:"terminatedPosition,omitempty"`
}

type ledgerMeta struct {
	ID        int64 `json:"ledgerId"`
	Entries   int64 `json:"entries"`
	Size      int64 `json:"size"`
	Timestamp int64 `json:"timestamp"` // unix ms when it was closed (0 while open)
	// Offload is the ledger's tiered-storage copy (bk_offload.go).
	Offload *offloadMeta `json:"offload,omitempty"`
}

func mlPath(name string) string { return ManagedLedgersPath + "/" + name }

// Open opens (or creates) a managed ledger. Opening recovers its last
// ledger, which fences a previous owner still writing to it, and starts a
// new ledger for this owner's writes.
func (f *BKFactory) Open(ctx context.Context, name string) (ManagedLedger, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	// One open of a name at a time: two would each recover (fence) the
	// other's ledger and race on the metadata.
	for {
		f.mu.Lock()
		if ml := f.open[name]; ml != nil {
			f.mu.Unlock()
			return ml, nil
		}
		if ch := f.opening[name]; ch != nil { // being opened, or closed
			f.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		f.opening[name] = ch
		f.mu.Unlock()
		ml, err := openBKLedger(ctx, f, name)
		f.mu.Lock()
		delete(f.opening, name)
		close(ch)
		if err == nil {
			f.open[name] = ml
		}
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return ml, nil
	}
}

// closing marks ml closed and takes it out of the open managed ledgers
// as its Close begins (ok is false if it was closed already). Until done
// runs (when Close ends) an Open of its name waits, rather than getting
// the closed instance or fencing it while it still persists its cursors.
func (f *BKFactory) closing(ml *bkLedger) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ml.mu.Lock()
	if ml.mu.closed {
		ml.mu.Unlock()
		return nil, false
	}
	ml.mu.closed = true
	ml.mu.Unlock()
	if f.open[ml.name] != ml {
		return func() {}, true
	}
	delete(f.open, ml.name)
	ch := make(chan struct{})
	f.opening[ml.name] = ch
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.opening[ml.name] == ch {
			delete(f.opening, ml.name)
		}
		close(ch)
	}, true
}

// List implements Lister: managed ledgers whose names start with prefix.
func (f *BKFactory) List(ctx context.Context, prefix string) ([]string, error) {
	// Names are paths: walk from the deepest existing directory of prefix.
	dir := prefix
	if i := strings.LastIndex(dir, "/"); i >= 0 {
		dir = dir[:i]
	} else {
		dir = ""
	}
	var out []string
	var walk func(rel string) error
	walk = func(rel string) error {
		p := ManagedLedgersPath
		if rel != "" {
			p += "/" + rel
		}
		kids, err := f.cfg.Store.Children(ctx, p)
		if errors.Is(err, metadata.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			child := k
			if rel != "" {
				child = rel + "/" + k
			}
			if !strings.HasPrefix(child, prefix) && !strings.HasPrefix(prefix, child+"/") {
				continue
			}
			b, _, err := f.cfg.Store.Get(ctx, ManagedLedgersPath+"/"+child)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				return err
			}
			var md mlMetadata
			if len(b) > 0 && json.Unmarshal(b, &md) == nil && md.Ledgers != nil && strings.HasPrefix(child, prefix) {
				out = append(out, child)
				continue // its children are cursors
			}
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dir); err != nil {
		return nil, fmt.Errorf("managedledger: list %q: %w", prefix, err)
	}
	sort.Strings(out)
	return out, nil
}

var (
	_ Factory = (*BKFactory)(nil)
	_ Lister  = (*BKFactory)(nil)
)

// CacheStats reports the entry cache's size in bytes and its hits and
// misses since the factory started (for metrics).
func (f *BKFactory) CacheStats() (size, hits, misses int64) { return f.cache.stats() }
