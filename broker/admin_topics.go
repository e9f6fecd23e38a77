package broker

// Admin REST API for topics, as Pulsar's PersistentTopics resource and as
// pulsaradmin (v0.19, pkg/admin/topic.go) calls it:
// /admin/v2/{persistent|non-persistent}/{tenant}/{namespace}[/{topic}/...].
// Subscriptions are in admin_subscriptions.go, stats in admin_stats.go,
// messages in admin_messages.go.
//
// Behaviour:
//   - A request about one topic that another broker serves (cluster mode)
//     is answered 307 to that broker, as Pulsar does; the topic is loaded
//     only through getTopic, which checks ownership again. Partitioned-topic
//     calls are answered here and reach partitions on other brokers over
//     HTTP.
//   - A topic exists when it is loaded, stored (the managed-ledger factory
//     lists it) or a partition of a partitioned topic. Calls about other
//     topics answer 404 instead of creating them.
//   - Errors are {"reason": ...}: 400 bad input, 404 no such topic or
//     subscription, 409 exists, 412 precondition (clients connected, no
//     metadata store), 501 what the storage or broker cannot do (deleting
//     a managed ledger when the factory is no managedledger.Deleter,
//     non-persistent topics),
//     503 topic moved while the call ran, 500 others. Checks run before
//     changes, so a refused call changes nothing.
//   - Deleting a topic deletes its managed ledger (managedledger.Deleter:
//     metadata, then ledgers and cursor ledgers). Connected clients make
//     it 412 unless force=true, which disconnects them first; a client
//     that reconnects afterwards finds a new, empty topic (auto creation).
//   - Terminate stops the stream (ManagedLedger.Terminate): sends fail with
//     TopicTerminatedError and new producers are refused, also after a
//     reload. It answers the last message id. Consumers at the end are told
//     REACHED_END_OF_TOPIC where their client handles it (subscription.go).
//   - Topic properties sent with a create are not stored (no place yet).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// maxPartitions bounds a partitioned topic's partition count (as
// CreatePartitionedTopic does).
const maxPartitions = 10000

// Admin errors with their HTTP statuses (statusOf).
var (
	errTopicNotFound    = errors.New("topic not found")
	errSubNotFound      = errors.New("subscription not found")
	errMessageNotFound  = errors.New("message not found")
	errExists           = errors.New("already exists")
	errInUse            = errors.New("has connected producers or consumers (use force=true to disconnect them)")
	errBadRequest       = errors.New("bad request")
	errNotSupported     = errors.New("not supported")
	errNotPartitioned   = errors.New("topic is not partitioned")
	errMetadataRequired = errors.New("no metadata store: partitioned topics are unavailable")
)

// statusOf maps an admin error to Pulsar's HTTP status.
func statusOf(err error) int {
	if re := (*remoteError)(nil); errors.As(err, &re) {
		return re.code
	}
	switch {
	case errors.Is(err, errBadRequest), errors.Is(err, metadata.ErrInvalidPath):
		return http.StatusBadRequest
	case errors.Is(err, errTopicNotFound), errors.Is(err, errSubNotFound), errors.Is(err, errMessageNotFound),
		errors.Is(err, errNotPartitioned):
		return http.StatusNotFound
	case errors.Is(err, errExists), errors.Is(err, metadata.ErrExists), errors.Is(err, metadata.ErrBadVersion):
		return http.StatusConflict
	case errors.Is(err, errInUse), errors.Is(err, errMetadataRequired):
		return http.StatusPreconditionFailed
	case errors.Is(err, errNotSupported):
		return http.StatusNotImplemented
	case errors.Is(err, errNotOwner):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func adminError(w http.ResponseWriter, err error) { httpError(w, statusOf(err), err.Error()) }

func badRequest(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", errBadRequest, field, fmt.Sprintf(format, args...))
}

// topicHandler serves a call about one topic, already routed to this broker.
type topicHandler func(w http.ResponseWriter, r *http.Request, name TopicName)

// registerAdmin adds the topic and subscription endpoints and, with a
// schema registry, its /admin/v2/schemas endpoints.
func (b *Broker) registerAdmin(mux *http.ServeMux) {
	b.registerTopicAdmin(mux)
	if b.cfg.Schemas != nil {
		b.cfg.Schemas.Register(mux)
	}
}

// registerTopicAdmin adds the topic and subscription endpoints. Patterns
// name the domain literally, so they never overlap the other /admin/v2
// resources (namespaces, clusters, schemas, brokers).
func (b *Broker) registerTopicAdmin(mux *http.ServeMux) {
	for _, domain := range []string{"persistent", "non-persistent"} {
		ns := "/admin/v2/" + domain + "/{tenant}/{namespace}"
		tp := ns + "/{topic}"
		mux.HandleFunc("GET "+ns, b.httpListTopics(domain))
		mux.HandleFunc("GET "+ns+"/partitioned", b.httpListPartitioned(domain))
		own := func(pattern string, h topicHandler) { mux.HandleFunc(pattern, b.routed(domain, h)) }
		here := func(pattern string, h topicHandler) { mux.HandleFunc(pattern, b.parsed(domain, h)) }
		own("PUT "+tp, b.httpCreateTopic)
		own("DELETE "+tp, b.httpDeleteTopic)
		here("POST "+tp+"/partitions", b.httpUpdatePartitions)
		here("DELETE "+tp+"/partitions", b.httpDeletePartitioned)
		own("POST "+tp+"/terminate", b.httpTerminate)
		own("GET "+tp+"/lastMessageId", b.httpLastMessageID)
		own("GET "+tp+"/stats", b.httpTopicStats)
		here("GET "+tp+"/partitioned-stats", b.httpPartitionedStats)
		own("GET "+tp+"/internalStats", b.httpInternalStats)
		own("GET "+tp+"/ledger/{ledger}/entry/{entry}", b.httpMessageByID)
		own("GET "+tp+"/examinemessage", b.httpExamineMessage)
		b.registerSubscriptionAdmin(tp, own)
	}
}

// parsed adapts h to a route: the topic comes from the path.
func (b *Broker) parsed(domain string, h topicHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := ParseTopicName(domain + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
		if err != nil {
			adminError(w, badRequest("topic", "%v", err))
			return
		}
		h(w, r, name)
	}
}

// routed is parsed, and sends calls about topics served elsewhere to
// their broker.
func (b *Broker) routed(domain string, h topicHandler) http.HandlerFunc {
	return b.parsed(domain, func(w http.ResponseWriter, r *http.Request, name TopicName) {
		res, err := b.lookup(r.Context(), name, r.URL.Query().Get("authoritative") == "true")
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		if !res.Self {
			redirectTo(w, r, res.HTTPURL, true)
			return
		}
		h(w, r, name)
	})
}

// loadedTopic returns the topic if it is loaded here.
func (b *Broker) loadedTopic(name TopicName) *topic {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.topics[name.String()]
}

// topicExists reports whether a topic is loaded, stored or a partition of
// a partitioned topic. Without a listing factory every topic counts as
// existing: there is no way to tell.
func (b *Broker) topicExists(ctx context.Context, name TopicName) (bool, error) {
	if b.loadedTopic(name) != nil {
		return true, nil
	}
	if _, ok := b.ledgers.(managedledger.Lister); !ok {
		return true, nil
	}
	if ok, err := b.stored(ctx, name); ok || err != nil {
		return ok, err
	}
	return b.isPartition(ctx, name)
}

// stored reports whether the factory lists the topic's managed ledger
// (false when it cannot list).
func (b *Broker) stored(ctx context.Context, name TopicName) (bool, error) {
	l, ok := b.ledgers.(managedledger.Lister)
	if !ok {
		return false, nil
	}
	names, err := l.List(ctx, name.ManagedLedgerName())
	if err != nil {
		return false, fmt.Errorf("topic %s: list stored topics: %w", name, err)
	}
	return slices.Contains(names, name.ManagedLedgerName()), nil
}

// isPartition reports whether name is a partition of a partitioned topic.
func (b *Broker) isPartition(ctx context.Context, name TopicName) (bool, error) {
	base, index, ok := partitionOf(name)
	if !ok {
		return false, nil
	}
	n, err := b.partitions(ctx, base)
	return index < n, err
}

// partitionOf splits "{topic}-partition-{i}" into the partitioned topic
// and the index.
func partitionOf(name TopicName) (TopicName, int, bool) {
	i := strings.LastIndex(name.Local, partitionSuffix)
	if i < 0 {
		return TopicName{}, 0, false
	}
	index, err := strconv.Atoi(name.Local[i+len(partitionSuffix):])
	if err != nil || index < 0 {
		return TopicName{}, 0, false
	}
	base := name
	base.Local = name.Local[:i]
	return base, index, true
}

// partitionName is partition i of a partitioned topic.
func partitionName(base TopicName, i int) TopicName {
	p := base
	p.Local = base.Local + partitionSuffix + strconv.Itoa(i)
	return p
}

// existingTopic loads a topic the admin call is about; errTopicNotFound
// when it does not exist (the call must not create it).
func (b *Broker) existingTopic(ctx context.Context, name TopicName) (*topic, error) {
	if !name.Persistent() {
		// It exists while it is loaded: nothing of it is stored.
		if t := b.loadedTopic(name); t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("topic %s: %w", name, errTopicNotFound)
	}
	ok, err := b.topicExists(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("topic %s: %w", name, errTopicNotFound)
	}
	return b.getTopic(ctx, name)
}

// clients counts the topic's producers and consumers, readers included.
func (t *topic) clients() (producers, consumers int) {
	t.mu.Lock()
	producers = len(t.producers) + len(t.waiting)
	subs := make([]*subscription, 0, len(t.subs)+len(t.readers))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	for s := range t.readers {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		consumers += len(s.consumers)
		s.mu.Unlock()
	}
	return producers, consumers
}

// namespaceFromPath is the {tenant}/{namespace} of an admin path, checked
// as Pulsar checks them (a bad name is the caller's mistake: 400).
func namespaceFromPath(r *http.Request) (tenant, ns string, err error) {
	tenant, ns = r.PathValue("tenant"), r.PathValue("namespace")
	if err := checkNamedEntity(tenant); err != nil {
		return "", "", badRequest("tenant", "%v", err)
	}
	if err := checkNamedEntity(ns); err != nil {
		return "", "", badRequest("namespace", "%v", err)
	}
	return tenant, ns, nil
}

func (b *Broker) httpListTopics(domain string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := namespaceFromPath(r); err != nil {
			adminError(w, err)
			return
		}
		topics := []string{}
		if domain == "persistent" {
			var err error
			if topics, err = b.persistentTopics(r.Context(), r.PathValue("tenant"), r.PathValue("namespace")); err != nil {
				adminError(w, err)
				return
			}
		} else if np := b.loadedNonPersistentTopics(r.PathValue("tenant"), r.PathValue("namespace")); len(np) > 0 {
			topics = np // this broker's; each broker lists what it serves
		}
		writeJSON(w, topics)
	}
}

func (b *Broker) httpListPartitioned(domain string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, ns, err := namespaceFromPath(r)
		if err != nil {
			adminError(w, err)
			return
		}
		topics := []string{}
		if b.cfg.Metadata != nil {
			dir := "/admin/partitioned-topics/" + tenant + "/" + ns + "/" + domain
			names, err := b.cfg.Metadata.Children(r.Context(), dir)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				adminError(w, fmt.Errorf("list partitioned topics of %s/%s: %w", tenant, ns, err))
				return
			}
			for _, n := range names {
				topics = append(topics, domain+"://"+tenant+"/"+ns+"/"+n)
			}
		}
		writeJSON(w, topics)
	}
}

// httpCreateTopic creates a non-partitioned topic (its managed ledger).
func (b *Broker) httpCreateTopic(w http.ResponseWriter, r *http.Request, name TopicName) {
	if err := b.createTopic(r.Context(), name); err != nil {
		adminError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *Broker) createTopic(ctx context.Context, name TopicName) error {
	if !name.Persistent() {
		return fmt.Errorf("topic %s: %w: non-persistent topics", name, errNotSupported)
	}
	if b.loadedTopic(name) != nil {
		return fmt.Errorf("topic %s: %w", name, errExists)
	}
	for _, check := range []func(context.Context, TopicName) (bool, error){b.stored, b.isPartition, b.isPartitioned} {
		if ok, err := check(ctx, name); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("topic %s: %w", name, errExists)
		}
	}
	_, err := b.getTopic(ctx, name)
	return err
}

// isPartitioned reports whether name is a partitioned topic.
func (b *Broker) isPartitioned(ctx context.Context, name TopicName) (bool, error) {
	n, err := b.partitions(ctx, name)
	return n > 0, err
}

func (b *Broker) httpDeleteTopic(w http.ResponseWriter, r *http.Request, name TopicName) {
	ctx, force := r.Context(), r.URL.Query().Get("force") == "true"
	if ok, err := b.isPartitioned(ctx, name); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("topic %s: %w as a partitioned topic: delete it with DELETE .../partitions", name, errExists)
		}
		adminError(w, err)
		return
	}
	if err := b.deleteTopic(ctx, name, force); err != nil {
		adminError(w, err)
		return
	}
	if err := b.deleteSchema(ctx, name); err != nil {
		adminError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteTopic deletes a topic served here: refused while clients are
// connected unless force, which disconnects them.
func (b *Broker) deleteTopic(ctx context.Context, name TopicName, force bool) error {
	if !name.Persistent() {
		return b.deleteNonPersistent(ctx, name, force)
	}
	if ok, err := b.topicExists(ctx, name); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("topic %s: %w", name, errTopicNotFound)
	}
	d, ok := b.ledgers.(managedledger.Deleter)
	if !ok {
		return fmt.Errorf("topic %s: %w: the topic storage cannot delete managed ledgers", name, errNotSupported)
	}
	if t := b.loadedTopic(name); t != nil && !force {
		if p, c := t.clients(); p+c > 0 {
			return fmt.Errorf("topic %s %w: %d producers, %d consumers", name, errInUse, p, c)
		}
	}
	key := name.String()
	this := func(t *topic) bool { return t.name.String() == key }
	b.unloadWhere(ctx, this)
	err := d.Delete(ctx, name.ManagedLedgerName())
	if errors.Is(err, managedledger.ErrNotFound) { // loaded, never stored (or deleted meanwhile)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("topic %s: delete managed ledger: %w", name, err)
	}
	// A client that reconnected in between loaded the deleted ledger:
	// unload it again, so that it comes back on a new, empty one.
	b.unloadWhere(ctx, this)
	b.log.Info("topic deleted", "topic", key, "force", force)
	return nil
}

// deleteNonPersistent unloads a non-persistent topic: that is all there is
// to delete.
func (b *Broker) deleteNonPersistent(ctx context.Context, name TopicName, force bool) error {
	t := b.loadedTopic(name)
	if t == nil {
		return fmt.Errorf("topic %s: %w", name, errTopicNotFound)
	}
	if p, c := t.clients(); p+c > 0 && !force {
		return fmt.Errorf("topic %s %w: %d producers, %d consumers", name, errInUse, p, c)
	}
	key := name.String()
	b.unloadWhere(ctx, func(t *topic) bool { return t.name.String() == key })
	b.log.Info("topic deleted", "topic", key, "force", force)
	return nil
}

// deleteSchema removes a deleted topic's schema history, unless the topic
// is one partition (the history belongs to the partitioned topic).
func (b *Broker) deleteSchema(ctx context.Context, name TopicName) error {
	if _, _, isPartition := partitionOf(name); isPartition || b.cfg.Schemas == nil {
		return nil
	}
	if _, err := b.cfg.Schemas.HardDelete(ctx, name.String()); err != nil {
		return fmt.Errorf("topic %s deleted, but not its schema: %w", name, err)
	}
	return nil
}

// httpUpdatePartitions raises a partitioned topic's partition count (the
// body is the new count); it can only grow.
func (b *Broker) httpUpdatePartitions(w http.ResponseWriter, r *http.Request, name TopicName) {
	n, err := decodePartitionCount(r.Body)
	if err == nil {
		err = b.updatePartitions(r.Context(), name, n)
	}
	if err != nil {
		adminError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodePartitionCount reads a partition count body: a number, or
// pulsaradmin's {"partitions": N, "properties": {...}} (the properties are
// not stored).
func decodePartitionCount(body io.Reader) (int, error) {
	raw, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil {
		return 0, badRequest("partitions", "read body: %v", err)
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var md struct {
		Partitions *int `json:"partitions"`
	}
	if err := json.Unmarshal(raw, &md); err != nil || md.Partitions == nil {
		return 0, badRequest("partitions", "body must be the number of partitions or {\"partitions\": N}")
	}
	return *md.Partitions, nil
}

func (b *Broker) updatePartitions(ctx context.Context, name TopicName, n int) error {
	if b.cfg.Metadata == nil {
		return errMetadataRequired
	}
	if n <= 0 || n > maxPartitions {
		return badRequest("partitions", "must be between 1 and %d, got %d", maxPartitions, n)
	}
	raw, st, err := b.cfg.Metadata.Get(ctx, partitionedPath(name))
	if errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("topic %s: %w", name, errNotPartitioned)
	}
	if err != nil {
		return fmt.Errorf("partitioned metadata of %s: %w", name, err)
	}
	var md map[string]any // kept whole: other members survive the update
	if err := json.Unmarshal(raw, &md); err != nil {
		return fmt.Errorf("partitioned metadata of %s: %w", name, err)
	}
	cur, _ := md["partitions"].(float64)
	switch {
	case n < int(cur):
		return badRequest("partitions", "can only grow: topic %s has %d, asked for %d", name, int(cur), n)
	case n == int(cur):
		return nil
	}
	md["partitions"] = n
	out, _ := json.Marshal(md)
	if _, err := b.cfg.Metadata.Put(ctx, partitionedPath(name), out, st.Version); err != nil {
		return fmt.Errorf("update partitions of %s (changed concurrently?): %w", name, err)
	}
	b.log.Info("partitioned topic updated", "topic", name.String(), "partitions", n, "was", int(cur))
	return nil
}

func (b *Broker) httpTerminate(w http.ResponseWriter, r *http.Request, name TopicName) {
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	pos, err := t.ml.Terminate(r.Context())
	if err != nil {
		adminError(w, fmt.Errorf("terminate %s: %w", name, err))
		return
	}
	t.terminated.Store(true)
	// As Pulsar, producers are disconnected: their clients reconnect, are
	// refused with TopicTerminatedError and fail what they still hold.
	for _, p := range t.takeProducers() {
		p.fence()
	}
	for _, s := range t.allSubs() {
		s.wakeAtEnd()
	}
	b.log.Info("topic terminated", "topic", name.String(), "last", pos.String())
	writeJSON(w, messageIDOf(name, pos, -1))
}

func (b *Broker) httpLastMessageID(w http.ResponseWriter, r *http.Request, name TopicName) {
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	last := t.ml.LastConfirmed()
	batch := -1
	if e, err := t.ml.ReadEntry(r.Context(), last); err == nil {
		if n := entryInfoOf(e.Data).messages; n > 1 {
			batch = n - 1
		}
	}
	writeJSON(w, messageIDOf(name, last, batch))
}

// messageIDJSON is Pulsar's MessageId in the REST API.
type messageIDJSON struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int   `json:"partitionIndex"`
	BatchIndex     int   `json:"batchIndex"`
}

func messageIDOf(name TopicName, p managedledger.Position, batch int) messageIDJSON {
	partition := -1
	if _, i, ok := partitionOf(name); ok {
		partition = i
	}
	return messageIDJSON{LedgerID: p.LedgerID, EntryID: p.EntryID, PartitionIndex: partition, BatchIndex: batch}
}

// latestLedger is the ledger (and entry) id of pulsaradmin's Latest.
const latestLedger = math.MaxInt64

// position is where a message id points: pulsaradmin's Earliest (-1:-1)
// is before the first entry, Latest (max:max) after the last.
func (m messageIDJSON) position() managedledger.Position {
	return managedledger.Position{LedgerID: m.LedgerID, EntryID: m.EntryID}
}

// decodeMessageID reads a MessageId body.
func decodeMessageID(raw []byte) (messageIDJSON, error) {
	var m messageIDJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, badRequest("messageId", "body must be {\"ledgerId\": L, \"entryId\": E}: %v", err)
	}
	return m, nil
}
