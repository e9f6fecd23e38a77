package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/internal/failover"
	"github.com/magnetar-io/magnetar/metadata"
	"golang.org/x/sync/errgroup"
)

// Config configures a broker's ownership service. Durations and
// thresholds carry Pulsar's key names.
type Config struct {
	Store metadata.Store
	// BrokerID is advertisedAddress:webServicePort, the broker's name in
	// the registry.
	BrokerID         string
	WebServiceURL    string // http://host:port
	PulsarServiceURL string // pulsar://host:port
	// WebServiceURLTLS and PulsarServiceURLTLS are the TLS ports'
	// (https://, pulsar+ssl://; "" when off), told to clients in lookups.
	WebServiceURLTLS, PulsarServiceURLTLS string
	Version                               string
	// Boundaries returns a namespace's bundle boundaries (its policies);
	// nil means DefaultBundles even bundles everywhere.
	Boundaries func(ctx context.Context, namespace string) ([]uint32, error)
	// Load reports the broker's current load; nil reports nothing but
	// the owned bundles.
	Load func() Load
	// CloseBundle stops serving a bundle's topics (producers and consumers
	// are closed and reconnect); called before ownership is released and
	// when ownership was lost. to, when not nil, is the broker the bundle
	// is handed to: clients are told to reconnect there directly
	// (CLOSE_PRODUCER/CLOSE_CONSUMER's assignedBrokerServiceUrl), which
	// spares them a lookup and its retries while the bundle moves.
	CloseBundle func(ctx context.Context, b Bundle, to *LookupResult)
	// SplitBundle records a bundle's split in the namespace policies (the
	// owner calls it; the bundle is then unloaded so its halves are
	// assigned afresh).
	SplitBundle func(ctx context.Context, b Bundle) error
	// OnSessionLost is called once the metadata session is lost: every
	// bundle is gone and the broker must stop (Pulsar's default
	// zookeeperSessionExpiredPolicy=shutdown).
	OnSessionLost func()
	// HTTPClient makes the admin calls to other brokers (unload, split):
	// it carries brokerClientAuthentication*'s credentials (they need a
	// superuser where authorization is on) and, with PeerTLS, the TLS
	// trust to call their HTTPS ports.
	HTTPClient *http.Client
	PeerTLS    bool

	// OwnerRefuses reports whether the broker at a service address
	// (host:port) refuses connections (gone.go); default: a TCP connect.
	OwnerRefuses func(ctx context.Context, addr string) bool
	// SessionTimeout is metadataStoreSessionTimeoutMillis: how long a dead
	// broker's ownership nodes outlive it (default 30 s, Pulsar's).
	SessionTimeout time.Duration
	// Failover, when set, records how long lookups waited for a dead
	// owner's node and took to acquire a free bundle (internal/failover).
	Failover *failover.Recorder

	// ReportInterval is loadBalancerReportUpdateMinIntervalMillis (5 s).
	ReportInterval time.Duration
	LoadBalancer   LoadBalancerConfig
	Logger         *slog.Logger
	Now            func() time.Time
}

func (c Config) withDefaults() Config {
	if c.ReportInterval <= 0 {
		c.ReportInterval = 5 * time.Second
	}
	if c.OwnerRefuses == nil {
		c.OwnerRefuses = refuses
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 30 * time.Second
	}
	if c.Boundaries == nil {
		c.Boundaries = func(context.Context, string) ([]uint32, error) { return EvenBoundaries(DefaultBundles), nil }
	}
	if c.Load == nil {
		c.Load = func() Load { return Load{} }
	}
	if c.CloseBundle == nil {
		c.CloseBundle = func(context.Context, Bundle, *LookupResult) {}
	}
	if c.OnSessionLost == nil {
		c.OnSessionLost = func() {}
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.LoadBalancer = c.LoadBalancer.withDefaults()
	return c
}

// Errors callers map to protocol errors.
var (
	// ErrNotServing: the service is closed or its session is lost.
	ErrNotServing = errors.New("ownership: this broker is not serving (shutting down or metadata session lost)")
	// ErrNotOwned: an unload or split of a bundle its caller does not own.
	ErrNotOwned = errors.New("bundle not owned")
	// ErrUnknownBundle: a range that is not one of the namespace's bundles.
	ErrUnknownBundle = errors.New("not a bundle of the namespace")
)

// Service is one broker's view of bundle ownership. See the package doc.
type Service struct {
	cfg    Config
	store  metadata.Store
	log    *slog.Logger
	owners *metadata.Cache[OwnerData]
	loads  *metadata.Cache[BrokerData]
	self   OwnerData

	stop    chan struct{}
	wg      sync.WaitGroup
	changed chan struct{} // owned set changed: report soon (capacity 1)

	mu struct {
		sync.Mutex
		owned      map[string]Bundle // by Bundle.String()
		leader     bool
		closed     bool
		regVer     int64                           // version of our registration node
		pending    map[string]map[string]time.Time // leader: broker -> bundle -> assigned at
		unloaded   map[string]time.Time            // leader: bundle -> shed at (grace period)
		heard      map[string]heardReport          // leader: broker -> its report last seen changing (liveLocked)
		handedOver map[string]time.Time            // bundle -> handed over from here at (handOverMemory)
		probes     map[string]probe                // owner's service address -> last liveness probe (gone.go)
		// suspended: the metadata session is suspended (the store is
		// unreachable, the session not yet expired): lookupWhileSuspended.
		suspended bool
		// peers: the other registered brokers as last read (Brokers);
		// where lookupWhileSuspended sends clients. Replaced, never changed.
		peers map[string]BrokerData
		// changing serialises, per bundle, what takes, releases or cleans
		// up its ownership node in this broker (bundleLock).
		changing map[string]*bundleLock
	}
}

// bundleLock is one bundle's lock in Service.mu.changing, dropped when
// nobody holds or waits for it.
type bundleLock struct {
	mu   sync.Mutex
	refs int
}

// lockBundle serialises the slow lookup path, Unload and ownership
// cleanups of bundle key in this broker. Without it one lookup could
// take another's fresh ownership node for one left by an earlier run
// (the node exists before the bundle is recorded as owned) and delete
// it, or re-take a bundle an unload is still releasing.
func (s *Service) lockBundle(key string) (unlock func()) {
	s.mu.Lock()
	l := s.mu.changing[key]
	if l == nil {
		l = &bundleLock{}
		s.mu.changing[key] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.mu.changing, key)
		}
		s.mu.Unlock()
	}
}

// Start registers the broker, joins the leader election and starts
// reporting load.
func Start(ctx context.Context, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.Store == nil || cfg.BrokerID == "" {
		return nil, errors.New("ownership: a metadata store and a broker id are required")
	}
	owners, err := metadata.NewCache[OwnerData](ctx, cfg.Store, ownerRoot)
	if err != nil {
		return nil, fmt.Errorf("ownership: watch %s: %w", ownerRoot, err)
	}
	loads, err := metadata.NewCache[BrokerData](ctx, cfg.Store, brokersRoot)
	if err != nil {
		owners.Close()
		return nil, fmt.Errorf("ownership: watch %s: %w", brokersRoot, err)
	}
	s := &Service{cfg: cfg, store: cfg.Store, log: cfg.Logger, owners: owners, loads: loads,
		self: OwnerData{NativeURL: cfg.PulsarServiceURL, HTTPURL: cfg.WebServiceURL,
			NativeURLTLS: cfg.PulsarServiceURLTLS, HTTPURLTLS: cfg.WebServiceURLTLS},
		stop: make(chan struct{}), changed: make(chan struct{}, 1)}
	s.mu.owned = map[string]Bundle{}
	s.mu.pending = map[string]map[string]time.Time{}
	s.mu.unloaded = map[string]time.Time{}
	s.mu.heard = map[string]heardReport{}
	s.mu.handedOver = map[string]time.Time{}
	s.mu.probes = map[string]probe{}
	s.mu.changing = map[string]*bundleLock{}
	ownWatch, err := cfg.Store.Watch(ctx, ownerRoot)
	if err == nil {
		err = s.register(ctx)
	}
	if err != nil {
		if ownWatch != nil {
			ownWatch.Close()
		}
		owners.Close()
		loads.Close()
		return nil, err
	}
	session := cfg.Store.SessionEvents()
	s.spawn(func() { s.watchSession(session) })
	s.spawn(s.reportLoop)
	s.spawn(s.electLoop)
	s.spawn(func() { s.watchOwnership(ownWatch) })
	return s, nil
}

func (s *Service) spawn(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// register creates the broker's ephemeral registration node. A node left
// by an earlier incarnation of this broker (same address, session not yet
// expired) is replaced: two live brokers cannot share an address.
func (s *Service) register(ctx context.Context) error {
	path := brokersRoot + "/" + s.cfg.BrokerID
	value, _ := json.Marshal(s.report())
	_, st, err := s.store.Create(ctx, path, value, metadata.CreateOptions{Ephemeral: true})
	if errors.Is(err, metadata.ErrExists) {
		s.log.Warn("replacing the registration left by an earlier run of this broker", "broker", s.cfg.BrokerID)
		if err := s.store.Delete(ctx, path, metadata.AnyVersion); err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return fmt.Errorf("ownership: remove stale registration %s: %w", path, err)
		}
		_, st, err = s.store.Create(ctx, path, value, metadata.CreateOptions{Ephemeral: true})
	}
	if err != nil {
		return fmt.Errorf("ownership: register broker at %s: %w", path, err)
	}
	s.mu.Lock()
	s.mu.regVer = st.Version
	s.mu.Unlock()
	return nil
}

// watchSession stops everything when the metadata session is lost, and
// notes when it is suspended (lookupWhileSuspended).
func (s *Service) watchSession(w *metadata.SessionWatcher) {
	for {
		select {
		case <-s.stop:
			return
		case st, ok := <-w.States():
			if !ok {
				return
			}
			switch st {
			case metadata.SessionLost:
				s.sessionLost()
				return
			case metadata.SessionSuspended, metadata.SessionReconnected, metadata.SessionConnected:
				s.mu.Lock()
				s.mu.suspended = st == metadata.SessionSuspended
				s.mu.Unlock()
			}
		}
	}
}

func (s *Service) sessionLost() {
	s.mu.Lock()
	owned := s.mu.owned
	s.mu.owned = map[string]Bundle{}
	s.mu.leader = false
	s.mu.closed = true
	s.mu.Unlock()
	s.log.Error("metadata session lost: this broker no longer owns any bundle and stops serving them", "bundles", len(owned))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range owned {
		s.cfg.CloseBundle(ctx, b, nil)
	}
	s.cfg.OnSessionLost()
}

// ID is this broker's name in the registry (advertisedAddress:webServicePort).
func (s *Service) ID() string { return s.cfg.BrokerID }

// IsLeader reports whether this broker is the load-manager leader.
func (s *Service) IsLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.leader
}

// Owned returns the bundles this broker owns, sorted.
func (s *Service) Owned() []Bundle {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Bundle, 0, len(s.mu.owned))
	for _, b := range s.mu.owned {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// OwnsTopic reports whether this broker owns the bundle of a topic of
// namespace ns. It looks at memory only: the hot path of every topic load.
func (s *Service) OwnsTopic(ns, topic string) bool {
	_, ok := s.OwnedBundleOf(ns, topic)
	return ok
}

// OwnedBundleOf returns the owned bundle holding a topic, if any.
func (s *Service) OwnedBundleOf(ns, topic string) (Bundle, bool) {
	h := HashTopic(topic)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.mu.owned {
		if b.Namespace == ns && b.Contains(h) {
			return b, true
		}
	}
	return Bundle{}, false
}

// BundleOf returns the bundle a topic of namespace ns belongs to now.
func (s *Service) BundleOf(ctx context.Context, ns, topic string) (Bundle, error) {
	bounds, err := s.cfg.Boundaries(ctx, ns)
	if err != nil {
		return Bundle{}, fmt.Errorf("bundles of namespace %s: %w", ns, err)
	}
	r, err := FindRange(bounds, HashTopic(topic))
	if err != nil {
		return Bundle{}, fmt.Errorf("bundles of namespace %s: %w", ns, err)
	}
	return Bundle{Namespace: ns, Range: r}, nil
}

// Owner returns a bundle's owner, if it has one.
func (s *Service) Owner(ctx context.Context, b Bundle) (OwnerData, bool, error) {
	od, _, found, err := s.owners.Get(ctx, b.path())
	if err != nil {
		return OwnerData{}, false, fmt.Errorf("owner of bundle %s: %w", b, err)
	}
	return od, found, nil
}

// ownerInStore is Owner read from the store itself.
func (s *Service) ownerInStore(ctx context.Context, b Bundle) (OwnerData, bool, error) {
	raw, _, err := s.store.Get(ctx, b.path())
	if errors.Is(err, metadata.ErrNotFound) {
		return OwnerData{}, false, nil
	}
	var od OwnerData
	if err == nil {
		err = json.Unmarshal(raw, &od)
	}
	if err != nil {
		return OwnerData{}, false, fmt.Errorf("owner of bundle %s: %w", b, err)
	}
	return od, true, nil
}

// Close releases every owned bundle (closing its topics first, so clients
// move to other brokers at once), leaves the election and unregisters.
func (s *Service) Close(ctx context.Context) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.shutdownLoops()
		return
	}
	s.mu.closed = true
	owned := s.mu.owned
	s.mu.owned = map[string]Bundle{}
	leader := s.mu.leader
	s.mu.leader = false
	s.mu.Unlock()
	s.shutdownLoops()
	s.handOverAll(ctx, owned)
	if leader {
		_ = s.store.Delete(ctx, leaderPath, metadata.AnyVersion)
	}
	_ = s.store.Delete(ctx, brokersRoot+"/"+s.cfg.BrokerID, metadata.AnyVersion)
}

// handOversAtOnce bounds the bundles a stopping broker hands over side by
// side. One after another, a bundle whose topics close their replicators
// takes most of a second, and the last of a dozen bundles kept its
// clients waiting for seconds; all at once, a broker with thousands of
// bundles would flood the metadata store and the bookies with closes.
const handOversAtOnce = 16

// handOverAll hands every bundle over, handOversAtOnce at a time, and
// returns when all are released.
func (s *Service) handOverAll(ctx context.Context, owned map[string]Bundle) {
	var g errgroup.Group
	g.SetLimit(handOversAtOnce)
	for _, b := range owned {
		g.Go(func() error {
			s.handOver(ctx, b)
			return nil
		})
	}
	_ = g.Wait() // handOver logs its own failures
}

func (s *Service) shutdownLoops() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
	s.owners.Close()
	s.loads.Close()
}

func (s *Service) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}
