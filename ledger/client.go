package ledger

import (
	"github.com/magnetar-io/magnetar/internal/failover"
	"github.com/magnetar-io/magnetar/internal/stage"

	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/internal/gopool"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Config configures a Client. Zero values take the defaults; names in
// parentheses are BookKeeper client settings.
type Config struct {
	// Stages, when set, records each append's time to its quorum
	// (ledger_add; internal/stage).
	Stages *stage.Recorder
	// Failover, when set, records how long writers took to see a bookie
	// fail and to replace it (internal/failover).
	Failover *failover.Recorder
	// Store holds ledger metadata and the bookie registrations (required).
	Store metadata.Store
	// Transport reaches bookies (default: a NetTransport over the
	// registrations in Store).
	Transport Transport
	// Placement chooses ensembles (default random; NewPlacement builds the
	// rack- or region-aware policy from a broker's settings). It sees
	// every registered bookie with its region and rack from the rack map
	// (registry.RackMapPath) or, if the map has none, as it registered,
	// and the bookies the map names that are not registered (Absent).
	Placement PlacementPolicy
	// AddTimeout: a bookie that has not answered an add this long is
	// replaced (addEntryTimeoutSec; default 10 s).
	AddTimeout time.Duration
	// ReadTimeout bounds one read of one replica (readEntryTimeoutSec;
	// default 10 s).
	ReadTimeout time.Duration
	// SpeculativeReadTimeout: after this long without an answer a read
	// also asks the next replica (speculativeReadTimeout; default 500 ms,
	// where BookKeeper's client waits 2 s: a broker taking over a topic
	// while a bookie of its ledgers is stopped read its cursors from that
	// bookie first and waited the whole timeout, 2.1 s in the fault suite's
	// pause-bookie seed 3; after one timeout the health tracker asks that
	// bookie last, health.go).
	SpeculativeReadTimeout time.Duration
	// ExplicitLACInterval: a writer with nothing in flight whose LAC moved
	// past the last one it piggybacked sends it to the bookies explicitly
	// this often, so tailing readers see its last entries without waiting
	// for the next add (explicitLacInterval; default 0: never).
	ExplicitLACInterval time.Duration
	// DisableBatchRead makes Read ask for one entry a request even where a
	// bookie holds the whole range (batchReadEnabled, inverted; batch
	// reads are on by default).
	DisableBatchRead bool
	// MetadataTimeout bounds metadata operations the client starts on its
	// own (ensemble changes; default 30 s).
	MetadataTimeout time.Duration
	// MaxFrameSize is the bookies' frame limit (nettyMaxFrameSizeBytes;
	// default bkproto.DefaultMaxFrameSize; a broker sets
	// bkproto.MaxFrameSize(wire.MaxEntrySize(maxMessageSize))). An append
	// whose add request is over it fails with ErrEntryTooLarge before it
	// is sent; answers are read up to it.
	MaxFrameSize int
	// BookieTLS, when set, makes the default transport reach bookies only
	// on their TLS endpoints (Pulsar's bookkeeperTLSClientAuthentication):
	// it is called at every dial, so reloaded certificate files apply to
	// new connections. A bookie without a TLS endpoint is not placed in new
	// ensembles, and dialing one fails naming it: there is no plaintext
	// fallback. Without it, TLS-only bookies are skipped likewise.
	BookieTLS func() *tls.Config
	// DialAddresses maps a bookie endpoint as registered (host:port) to
	// the address the default transport dials instead; endpoints not in
	// it are dialed as registered. It is per client, so one broker can
	// reach a bookie through a tunnel, a NAT or (in the stretched-cluster
	// tests) a relay adding an inter-region delay, while others dial it
	// directly (the broker's bookieAddressMap).
	DialAddresses map[string]string
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Placement == nil {
		c.Placement = NewRandomPlacement(uint64(time.Now().UnixNano()))
	}
	if c.AddTimeout <= 0 {
		c.AddTimeout = 10 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 10 * time.Second
	}
	if c.SpeculativeReadTimeout <= 0 {
		c.SpeculativeReadTimeout = 500 * time.Millisecond
	}
	if c.MetadataTimeout <= 0 {
		c.MetadataTimeout = 30 * time.Second
	}
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = bkproto.DefaultMaxFrameSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Client creates, opens, recovers and deletes ledgers.
type Client struct {
	cfg       Config
	log       *slog.Logger
	meta      metaStore
	transport Transport
	health    *healthTransport // wraps transport: which bookies stall (reads ask them last)
	ownNet    *NetTransport    // closed with the client when it made it
	reg       *registryView
	caps      *batchCaps // which bookies serve batch reads
	// maxFrame is the add frame size appends are refused above:
	// Config.MaxFrameSize, lowered when a bookie refuses a smaller add as
	// too large (its limit is below ours), so that entry is refused before
	// it is sent next time instead of failing a ledger again.
	maxFrame atomic.Int64
	// deliveries runs the handles' delivery goroutines on reused
	// goroutines (WriteHandle.signal).
	deliveries *gopool.Pool
}

// New returns a client. It reads the registered bookies and keeps
// watching them.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Store == nil {
		return nil, errors.New("ledger: Config.Store is required")
	}
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, log: cfg.Logger, meta: metaStore{cfg.Store}, deliveries: gopool.New(500 * time.Millisecond)}
	c.maxFrame.Store(int64(cfg.MaxFrameSize))
	reg, err := startRegistry(ctx, cfg.Store, cfg.Logger)
	if err != nil {
		return nil, err
	}
	c.reg = reg
	c.transport = cfg.Transport
	if c.transport == nil {
		c.ownNet = NewNetTransport(reg, client.Options{MaxFrameSize: cfg.MaxFrameSize}, cfg.BookieTLS)
		c.ownNet.dialAt = cfg.DialAddresses
		c.transport = c.ownNet
	}
	c.health = newHealthTransport(c.transport)
	c.transport = c.health
	c.caps = newBatchCaps(c.transport, cfg.ReadTimeout)
	return c, nil
}

// Close stops the client (not its handles' ledgers: close those first).
func (c *Client) Close() {
	c.reg.close()
	c.deliveries.Close()
	if c.ownNet != nil {
		c.ownNet.Close()
	}
}

// bookies are the registered bookies placement may choose: with the
// client's own network transport, those it can reach (a TLS endpoint with
// BookieTLS, a plaintext one without).
func (c *Client) bookies() []BookieInfo {
	all := c.reg.list()
	if c.ownNet == nil {
		return all
	}
	out := all[:0]
	for _, b := range all {
		if _, err := endpoint(b, c.cfg.BookieTLS != nil); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// unreachableNote names the registered bookies bookies() leaves out, for
// an error saying there are not enough.
func (c *Client) unreachableNote() string {
	if c.ownNet == nil {
		return ""
	}
	var skipped []string
	for _, b := range c.reg.list() {
		if _, err := endpoint(b, c.cfg.BookieTLS != nil); err != nil {
			skipped = append(skipped, b.ID)
		}
	}
	if len(skipped) == 0 {
		return ""
	}
	if c.cfg.BookieTLS != nil {
		return fmt.Sprintf(" (left out, no TLS endpoint while bookkeeperTLSClientAuthentication is on: %v)", skipped)
	}
	return fmt.Sprintf(" (left out, TLS only while bookkeeperTLSClientAuthentication is off: %v)", skipped)
}

// lowerMaxFrame lowers the add frame limit to n unless it is already at or
// below it; it reports whether it did.
func (c *Client) lowerMaxFrame(n int64) bool {
	for {
		cur := c.maxFrame.Load()
		if n >= cur {
			return false
		}
		if c.maxFrame.CompareAndSwap(cur, n) {
			return true
		}
	}
}

// CreateOptions describe a new ledger.
type CreateOptions struct {
	EnsembleSize, WriteQuorumSize, AckQuorumSize int
	DigestType                                   DigestType // default CRC32C
	Password                                     []byte
	Custom                                       map[string][]byte
	// BookieGroups are the rack-map groups the ledger is placed in
	// (Pulsar's bookie affinity groups: primary, then secondary when the
	// primary has too few writable bookies); nil: every bookie. They are
	// kept in the ledger's custom metadata (AffinityGroupsKey), so
	// ensemble changes and re-replication stay in them.
	BookieGroups []string
}

// AffinityGroupsKey is the custom-metadata key of a ledger's bookie
// affinity groups (comma-separated, primary first).
const AffinityGroupsKey = "magnetar/bookie-affinity-groups"

// groupsOf reads a ledger's affinity groups from its custom metadata.
func groupsOf(md *Metadata) []string {
	v := md.Custom[AffinityGroupsKey]
	if len(v) == 0 {
		return nil
	}
	return strings.Split(string(v), ",")
}

// candidates are the bookies a ledger in groups may be placed on: those
// of the first groups (in order) that together have at least need
// writable bookies, or all of the groups' bookies; every bookie without
// groups. Absent bookies are kept (placement names their domains).
func candidates(bookies []BookieInfo, groups []string, need int) []BookieInfo {
	if len(groups) == 0 {
		return bookies
	}
	var out []BookieInfo
	for i := range groups {
		out = out[:0]
		n := 0
		for _, b := range bookies {
			if slices.Contains(groups[:i+1], b.Group) {
				out = append(out, b)
				if !b.ReadOnly && !b.Absent {
					n++
				}
			}
		}
		if n >= need {
			break
		}
	}
	return out
}

// Create makes a ledger and returns its writer.
func (c *Client) Create(ctx context.Context, o CreateOptions) (*WriteHandle, error) {
	if o.DigestType == "" {
		o.DigestType = DigestCRC32C
	}
	if _, err := newDigester(o.DigestType, o.Password); err != nil {
		return nil, fmt.Errorf("ledger create: %w", err)
	}
	md := &Metadata{FormatVersion: metadataFormatVersion, EnsembleSize: o.EnsembleSize, WriteQuorumSize: o.WriteQuorumSize,
		AckQuorumSize: o.AckQuorumSize, State: StateOpen, LastEntryID: -1, DigestType: o.DigestType,
		Password: o.Password, CreatedMillis: nowMillis(), Custom: o.Custom}
	if len(o.BookieGroups) > 0 {
		custom := make(map[string][]byte, len(o.Custom)+1)
		for k, v := range o.Custom {
			custom[k] = v
		}
		custom[AffinityGroupsKey] = []byte(strings.Join(o.BookieGroups, ","))
		md.Custom = custom
	}
	ens, err := c.cfg.Placement.NewEnsemble(candidates(c.bookies(), o.BookieGroups, o.EnsembleSize), o.EnsembleSize, o.WriteQuorumSize, o.AckQuorumSize, nil)
	if err != nil {
		return nil, fmt.Errorf("ledger create: %w%s", err, c.unreachableNote())
	}
	md.Ensembles = []Fragment{{FirstEntry: 0, Bookies: ens}}
	if err := md.validate(); err != nil {
		return nil, fmt.Errorf("ledger create: %w", err)
	}
	id, err := c.meta.nextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger create: %w", err)
	}
	version, err := c.meta.create(ctx, id, md)
	if err != nil {
		return nil, fmt.Errorf("ledger create: %w", err)
	}
	return newWriteHandle(c, id, md, version, o.Password, false, -1, 0)
}

// Delete removes a ledger's metadata; bookies reclaim its entries through
// garbage collection.
func (c *Client) Delete(ctx context.Context, id int64) error {
	return c.meta.remove(ctx, id)
}

// LedgerExists implements bookie.LedgerOracle (the bookie's garbage
// collector asks it). A bookie deletes a ledger on "no", so "no" is never
// a stale answer: this client's metadata server may not have applied the
// ledger's creation yet (a ZooKeeper follower behind the leader), so it is
// synced and asked again first. A stale "yes"
// only delays a deletion (ledger ids are never reused): it is trusted.
func (c *Client) LedgerExists(ctx context.Context, id int64) (bool, error) {
	ok, _, err := c.cfg.Store.Exists(ctx, Path(id))
	if err != nil || ok {
		return ok, err
	}
	if err := metadata.Sync(ctx, c.cfg.Store, Path(id)); err != nil {
		return false, fmt.Errorf("ledger %d: sync metadata before deciding it is deleted: %w", id, err)
	}
	ok, _, err = c.cfg.Store.Exists(ctx, Path(id))
	return ok, err
}

// ReadMetadata returns a ledger's metadata.
func (c *Client) ReadMetadata(ctx context.Context, id int64) (*Metadata, error) {
	md, _, err := c.meta.read(ctx, id)
	return md, err
}

// registryView is this client's copy of the bookie registry: the set of
// registered bookies, kept current by a watch.
type registryView struct {
	store  metadata.Store
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	bookies map[string]BookieInfo
	absent  []BookieInfo // in the rack map or departed, not registered
	// departed are bookies this client saw registered that left since
	departed map[string]BookieInfo
}

func startRegistry(ctx context.Context, store metadata.Store, log *slog.Logger) (*registryView, error) {
	r := &registryView{store: store, log: log, done: make(chan struct{}), bookies: map[string]BookieInfo{},
		departed: map[string]BookieInfo{}}
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.watch(wctx)
	return r, nil
}

func (r *registryView) refresh(ctx context.Context) error {
	all, err := listBookies(ctx, r.store)
	if err != nil {
		return err
	}
	m := make(map[string]BookieInfo, len(all))
	var absent []BookieInfo
	named := map[string]bool{}
	for _, b := range all {
		named[b.ID] = true
		if b.Absent {
			absent = append(absent, b)
		} else {
			m[b.ID] = b
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Bookies that were registered and left are remembered (as Absent,
	// where they stood), so that placement names a lost region or rack
	// also without a rack map.
	for id, b := range r.bookies {
		if !named[id] && len(r.departed) < maxDeparted {
			b.Absent, b.ReadOnly, b.OutOfSpace = true, false, false
			r.departed[id] = b
		}
	}
	for id, b := range r.departed {
		if named[id] {
			delete(r.departed, id)
		} else {
			absent = append(absent, b)
		}
	}
	r.bookies, r.absent = m, absent
	return nil
}

// maxDeparted bounds how many departed bookies a client remembers.
const maxDeparted = 1024

// listBookies reads the registered bookies, placed by the rack map where
// it names them, and the bookies the rack map names that are not
// registered (Absent).
func listBookies(ctx context.Context, store metadata.Store) ([]BookieInfo, error) {
	regs, err := registry.Bookies(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("ledger: list bookies: %w", err)
	}
	racks, _, err := registry.ReadRackMap(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	out := make([]BookieInfo, 0, len(regs))
	known := map[string]bool{}
	for _, b := range regs {
		info := BookieInfo{ID: b.BookieID, Address: b.Address, TLSAddress: b.TLSAddress, Rack: b.Rack, Region: b.Region, ReadOnly: b.ReadOnly,
			OutOfSpace: b.OutOfSpace}
		placeFromRackMap(&info, racks, b.Address)
		out = append(out, info)
		known[b.BookieID], known[b.Address] = true, true
	}
	var absent []BookieInfo
	for _, group := range racks {
		for id := range group {
			if known[id] {
				continue
			}
			known[id] = true
			info := BookieInfo{ID: id, Absent: true}
			placeFromRackMap(&info, racks, "")
			absent = append(absent, info)
		}
	}
	sort.Slice(absent, func(i, j int) bool { return absent[i].ID < absent[j].ID })
	return append(out, absent...), nil
}

// placeFromRackMap sets a bookie's group, region and rack from the rack
// map entry for its id (or its address), if there is one; otherwise it
// keeps what the bookie registered.
func placeFromRackMap(b *BookieInfo, racks registry.RackMap, addr string) {
	info, group, ok := racks.Lookup(b.ID)
	if !ok && addr != "" {
		info, group, ok = racks.Lookup(addr)
	}
	if !ok {
		return
	}
	b.Group = group
	if info.Rack == "" {
		return
	}
	region, rack := registry.ParseLocation(info.Rack)
	if region != "" {
		b.Region = region
	}
	b.Rack = rack
}

// watch re-lists the bookies on every change under RackMapPath (the rack
// map and, below it, AvailablePath), and every 30 s in case a watch was
// interrupted.
func (r *registryView) watch(ctx context.Context) {
	defer close(r.done)
	for ctx.Err() == nil {
		w, err := r.store.Watch(ctx, registry.RackMapPath)
		if err != nil {
			r.sleep(ctx, time.Second)
			continue
		}
		r.follow(ctx, w)
		w.Close()
	}
}

func (r *registryView) follow(ctx context.Context, w *metadata.Watcher) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	if err := r.refresh(ctx); err != nil && ctx.Err() == nil { // changes before the watch began
		r.log.Warn("ledger client could not refresh the bookie list", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events():
			if !ok {
				return
			}
		case <-t.C:
		}
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("ledger client could not refresh the bookie list", "err", err)
		}
	}
}

func (r *registryView) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (r *registryView) close() {
	r.cancel()
	<-r.done
}

func (r *registryView) list() []BookieInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]BookieInfo, 0, len(r.bookies)+len(r.absent))
	for _, b := range r.bookies {
		out = append(out, b)
	}
	return append(out, r.absent...)
}

// info is what the view knows of bookie id (just its id if nothing).
func (r *registryView) info(id string) BookieInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.bookies[id]; ok {
		return b
	}
	for _, b := range r.absent {
		if b.ID == id {
			return b
		}
	}
	return BookieInfo{ID: id}
}

// Bookie implements AddressBook.
func (r *registryView) Bookie(id string) (BookieInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.bookies[id]
	return b, ok
}
