package admin

// The broker's part of the admin API: what only the broker serving a
// topic knows. The broker implements these interfaces; this package
// parses requests, routes calls about a topic to its owner (307), and
// writes the answers.

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/ownership"
)

// Topic names below are full names as the path spells them
// (persistent://tenant/namespace/topic); the broker parses them.

// Topics serves the topic endpoints.
type Topics interface {
	// CheckTopic says why name is not a valid topic name (nil if it is).
	CheckTopic(name string) error
	// LookupTopic says which broker serves the topic.
	LookupTopic(ctx context.Context, name string, authoritative bool) (ownership.LookupResult, error)
	// AdvertisedAddress is the host:port clients connect to.
	AdvertisedAddress() string
	// Partitions is a topic's partition count (0: not partitioned).
	Partitions(ctx context.Context, name string) (int, error)
	// CreatePartitioned records a partitioned topic with n partitions
	// and its properties (nil: none).
	CreatePartitioned(ctx context.Context, name string, n int, props map[string]string) error
	UpdatePartitions(ctx context.Context, name string, n int) error
	DeletePartitioned(ctx context.Context, name string, force bool) error
	PartitionedStats(ctx context.Context, name string) (PartitionedTopicStats, error)
	// DomainTopics lists a namespace's topics of one domain
	// (persistent, non-persistent); PartitionedTopics its partitioned ones.
	DomainTopics(ctx context.Context, domain, tenant, namespace string) ([]string, error)
	PartitionedTopics(ctx context.Context, domain, tenant, namespace string) ([]string, error)
	// CreateTopic creates a non-partitioned topic with its properties
	// (nil: none).
	CreateTopic(ctx context.Context, name string, props map[string]string) error
	// TopicProperties are a topic's properties (a partitioned topic's
	// are its partitioned metadata's); UpdateTopicProperties sets the keys
	// of set and removes those of remove.
	TopicProperties(ctx context.Context, name string) (map[string]string, error)
	UpdateTopicProperties(ctx context.Context, name string, set map[string]string, remove []string) error
	DeleteTopic(ctx context.Context, name string, force bool) error
	Terminate(ctx context.Context, name string) (MessageID, error)
	LastMessageID(ctx context.Context, name string) (MessageID, error)
	// MessageIDByTimestamp is the id of the first message published at
	// or after ts (unix ms); ErrMessageNotFound when there is none.
	MessageIDByTimestamp(ctx context.Context, name string, ts int64) (MessageID, error)
	TopicStats(ctx context.Context, name string) (TopicStats, error)
	InternalStats(ctx context.Context, name string) (InternalStats, error)
	// UnloadTopic closes the topic here; its clients reconnect.
	UnloadTopic(ctx context.Context, name string)
}

// Subscriptions serves the subscription endpoints. sub is the
// subscription's name, unescaped.
type Subscriptions interface {
	Subscriptions(ctx context.Context, topic string) ([]string, error)
	CreateSubscription(ctx context.Context, topic, sub string, start MessageID) error
	DeleteSubscription(ctx context.Context, topic, sub string, force bool) error
	SkipMessages(ctx context.Context, topic, sub string, n int64) error
	ClearBacklog(ctx context.Context, topic, sub string) error
	// ResetCursorToTime moves the subscription to the first entry
	// published at or after ms (milliseconds since the epoch).
	ResetCursorToTime(ctx context.Context, topic, sub string, ms int64) error
	ResetCursor(ctx context.Context, topic, sub string, to MessageID) error
	// ExpireMessages acknowledges what was published before cutoff;
	// ExpireAllSubscriptions does it on every subscription.
	ExpireMessages(ctx context.Context, topic, sub string, cutoff time.Time) error
	// ExpireMessagesTo acknowledges up to the entry (the one before it if
	// to.IsExcluded): pulsar-admin's expire-messages --position.
	ExpireMessagesTo(ctx context.Context, topic, sub string, to MessageID) error
	ExpireAllSubscriptions(ctx context.Context, topic string, cutoff time.Time) error
	// PeekMessage is the n-th (from 1) unacknowledged entry.
	PeekMessage(ctx context.Context, topic, sub string, n int) (Message, error)
	// SetReplicatedSubscriptionStatus turns a subscription's replication
	// across clusters on or off (broker/replsubs.go).
	SetReplicatedSubscriptionStatus(ctx context.Context, topic, sub string, enabled bool) error
}

// Messages serves the endpoints that answer one stored message.
type Messages interface {
	MessageByID(ctx context.Context, topic string, ledger, entry int64) (Message, error)
	// ExamineMessage is the n-th entry (from 1) from the start, or from
	// the end unless earliest.
	ExamineMessage(ctx context.Context, topic string, earliest bool, n int64) (Message, error)
}

// Cluster serves the broker and bundle endpoints.
type Cluster interface {
	ClusterName() string
	// Ownership is the bundle ownership service; nil outside cluster mode.
	Ownership() *ownership.Service
	// Closing reports whether the broker is shutting down.
	Closing() bool
	// UnloadNamespace closes the namespace's topics loaded here.
	UnloadNamespace(ctx context.Context, namespace string)
}

// BrokerStats serves /admin/v2/broker-stats.
type BrokerStats interface {
	// LoadedTopicStats are the stats of every loaded topic.
	LoadedTopicStats() []LoadedTopic
	// MetricsBroker names this broker in the metrics' dimensions.
	MetricsBroker() string
}

// Bookies serves /admin/v2/bookies.
type Bookies interface {
	// Bookies lists the registered bookies, sorted by id.
	Bookies(ctx context.Context) ([]BookieInfo, error)
	// RacksInfo is the bookie rack map (group -> bookie -> rack).
	RacksInfo(ctx context.Context) (BookiesRackConfiguration, error)
	// SetBookieRack places bookie in group (removing it from any other).
	SetBookieRack(ctx context.Context, bookie, group string, info BookieRackInfo) error
	// DeleteBookieRack removes bookie from the map; ErrNotFound (wrapped)
	// if the map does not name it.
	DeleteBookieRack(ctx context.Context, bookie string) error
}

// DynamicConfig serves /admin/v2/brokers/configuration: the broker keeps
// the settings and their validation.
type DynamicConfig interface {
	DynamicKeys() []string
	DynamicOverrides(ctx context.Context) (map[string]string, error)
	SetDynamic(ctx context.Context, key, value string) error
	DeleteDynamic(ctx context.Context, key string) error
	RuntimeConfig() map[string]string
	InternalConfig() map[string]string
}

// Broker is everything a broker serves of the admin API.
type Broker interface {
	Topics
	Subscriptions
	Messages
	Cluster
	BrokerStats
	Bookies
	DynamicConfig
	TopicPolicies
}

// LoadedTopic is one loaded topic's stats with where it belongs.
type LoadedTopic struct {
	Name, Domain, Namespace, Bundle string
	Stats                           TopicStats
	// Metrics are the sums broker-stats/metrics adds up.
	Metrics TopicMetrics
}

// TopicMetrics are a topic's rates and counts as broker-stats/metrics
// sums them.
type TopicMetrics struct {
	InRate, OutRate, InThroughput, OutThroughput float64
	StorageSize, Backlog                         int64
	Producers, Consumers, Subscriptions          int
}

type brokerAPI struct {
	b   Broker
	log *slog.Logger
}

// RegisterBroker adds the broker's admin endpoints to mux: lookup,
// topics, subscriptions, messages, brokers and bundles, broker-stats,
// bookies and dynamic configuration. log receives server-side failures;
// nil discards.
func RegisterBroker(mux *http.ServeMux, b Broker, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &brokerAPI{b: b, log: log}
	a.registerLookup(mux)
	a.registerTopics(mux)
	a.registerCluster(mux)
	a.registerBrokerStats(mux)
	a.registerBookies(mux)
	a.registerDynamicConfig(mux)
	a.registerTransactions(mux)
}

// fail answers with err's status (StatusOf); server-side failures are
// logged, the caller's mistakes are not.
func (a *brokerAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := StatusOf(err)
	if status >= 500 {
		a.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	WriteError(w, status, err.Error())
}

// topicOfPath is the topic name of a path with {domain} (or the domain
// given), {tenant}, {namespace} and {topic}.
func topicOfPath(r *http.Request, domain string) string {
	if domain == "" {
		domain = r.PathValue("domain")
	}
	return domain + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic")
}

// redirectTo answers 307 with the same request on another broker, as
// Pulsar does for lookups and admin calls on topics owned elsewhere.
// webURLFor is the owner's web URL for this request: its https one when
// the client came over TLS and the owner has one.
func webURLFor(r *http.Request, plain, tls string) string {
	if r.TLS != nil && tls != "" {
		return tls
	}
	return plain
}

func redirectTo(w http.ResponseWriter, r *http.Request, baseURL string, authoritative bool) {
	q := r.URL.Query()
	q.Set("authoritative", strconv.FormatBool(authoritative))
	w.Header().Set("Location", strings.TrimSuffix(baseURL, "/")+requestPath(r)+"?"+q.Encode())
	w.WriteHeader(http.StatusTemporaryRedirect)
}

type requestPathKey struct{}

// WithRequestPath records the escaped path the client asked for, when the
// request is served under another (the v1 routes): a redirect sends the
// client to the same route elsewhere, which may be a Pulsar broker.
func WithRequestPath(r *http.Request, escaped string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), requestPathKey{}, escaped))
}

// requestPath is the escaped path the client asked for.
func requestPath(r *http.Request) string {
	if p, ok := r.Context().Value(requestPathKey{}).(string); ok {
		return p
	}
	return r.URL.EscapedPath()
}

// topicHandler serves a call about one topic, already routed to this broker.
type topicHandler func(w http.ResponseWriter, r *http.Request, topic string)

// parsed adapts h to a route of domain: the topic comes from the path
// (400 for a bad name).
func (a *brokerAPI) parsed(domain string, h topicHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := topicOfPath(r, domain)
		if err := a.b.CheckTopic(name); err != nil {
			a.fail(w, r, BadRequest("topic", "%v", err))
			return
		}
		h(w, r, name)
	}
}

// routed is parsed, and sends calls about topics served elsewhere to
// their broker (307); the broker loads a topic only after checking
// ownership again.
func (a *brokerAPI) routed(domain string, h topicHandler) http.HandlerFunc {
	return a.parsed(domain, func(w http.ResponseWriter, r *http.Request, name string) {
		a.routedTo(w, r, name, func() { h(w, r, name) })
	})
}

// answer writes v as JSON, or err.
func (a *brokerAPI) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, v)
}

// done answers 204, or err.
func (a *brokerAPI) done(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
