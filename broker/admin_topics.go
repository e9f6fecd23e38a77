package broker

// The topic operations of the admin API (admin.Topics): package
// broker/admin routes and parses the requests and writes the answers;
// these find, create, delete and terminate topics under the broker's
// locks. Subscriptions are in admin_subscriptions.go, stats in
// admin_stats.go, messages in admin_messages.go, partitioned topics in
// admin_partitioned.go.
//
// Behaviour:
//   - The topic is loaded only through getTopic, which checks ownership
//     again (the admin layer redirected calls about topics served
//     elsewhere).
//   - A topic exists when it is loaded, stored (the managed-ledger factory
//     lists it) or a partition of a partitioned topic. Calls about other
//     topics fail with errTopicNotFound instead of creating them.
//   - Checks run before changes, so a refused call changes nothing.
//   - Deleting a topic deletes its managed ledger (managedledger.Deleter:
//     metadata, then ledgers and cursor ledgers). Connected clients make
//     it errInUse unless force, which disconnects them first; a client
//     that reconnects afterwards finds a new, empty topic (auto creation).
//   - Terminate stops the stream (ManagedLedger.Terminate): sends fail with
//     TopicTerminatedError and new producers are refused, also after a
//     reload. Consumers at the end are told REACHED_END_OF_TOPIC where
//     their client handles it (subscription.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// maxPartitions bounds a partitioned topic's partition count (as
// CreatePartitionedTopic does).
const maxPartitions = 10000

// Admin errors: admin.StatusOf maps them to HTTP statuses.
var (
	errTopicNotFound    = admin.ErrTopicNotFound
	errSubNotFound      = admin.ErrSubscriptionNotFound
	errMessageNotFound  = admin.ErrMessageNotFound
	errExists           = admin.ErrTopicExists
	errInUse            = admin.ErrInUse
	errNotSupported     = admin.ErrNotSupported
	errNotPartitioned   = admin.ErrNotPartitioned
	errMetadataRequired = admin.ErrMetadataRequired
)

func badRequest(field, format string, args ...any) error {
	return admin.BadRequest(field, "%s", fmt.Sprintf(format, args...))
}

// adminTopic parses the topic name of an admin call.
func adminTopic(name string) (TopicName, error) {
	t, err := ParseTopicName(name)
	if err != nil {
		return TopicName{}, badRequest("topic", "%v", err)
	}
	return t, nil
}

// CheckTopic says why name is not a valid topic name (admin.Topics).
func (b *Broker) CheckTopic(name string) error {
	_, err := ParseTopicName(name)
	return err
}

// LookupTopic says which broker serves the topic (admin.Topics).
func (b *Broker) LookupTopic(ctx context.Context, name string, authoritative bool) (ownership.LookupResult, error) {
	t, err := ParseTopicName(name)
	if err != nil {
		return ownership.LookupResult{}, err
	}
	res, err := b.lookup(ctx, t, authoritative)
	if err == nil && res.Self && res.HTTPURLTLS == "" && b.cfg.AdvertisedWebAddressTLS != "" {
		res.HTTPURLTLS = "https://" + b.cfg.AdvertisedWebAddressTLS
	}
	return res, err
}

// AdvertisedAddress is the host:port clients connect to (admin.Topics).
func (b *Broker) AdvertisedAddress() string { return b.advertisedAddress() }

// existingAdminTopic loads the topic an admin call names; errTopicNotFound
// when it does not exist.
func (b *Broker) existingAdminTopic(ctx context.Context, name string) (*topic, error) {
	t, err := adminTopic(name)
	if err != nil {
		return nil, err
	}
	return b.existingTopic(ctx, t)
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

// DomainTopics lists a namespace's topics of one domain (admin.Topics):
// the persistent ones stored or loaded, the non-persistent ones this
// broker serves (each broker lists what it serves).
func (b *Broker) DomainTopics(ctx context.Context, domain, tenant, ns string) ([]string, error) {
	if err := checkNamespace(tenant, ns); err != nil {
		return nil, err
	}
	if domain == "persistent" {
		return b.persistentTopics(ctx, tenant, ns)
	}
	if np := b.loadedNonPersistentTopics(tenant, ns); len(np) > 0 {
		return np, nil
	}
	return []string{}, nil
}

// checkNamespace checks the {tenant}/{namespace} of an admin call as
// Pulsar checks them (a bad name is the caller's mistake); a v1 namespace
// is "cluster/namespace".
func checkNamespace(tenant, ns string) error {
	if err := checkNamedEntity(tenant); err != nil {
		return badRequest("tenant", "%v", err)
	}
	if err := checkNamespacePart(ns); err != nil {
		return badRequest("namespace", "%v", err)
	}
	return nil
}

// PartitionedTopics lists a namespace's partitioned topics of one domain
// (admin.Topics); none without a metadata store.
func (b *Broker) PartitionedTopics(ctx context.Context, domain, tenant, ns string) ([]string, error) {
	if err := checkNamespace(tenant, ns); err != nil {
		return nil, err
	}
	topics := []string{}
	if b.cfg.Metadata == nil {
		return topics, nil
	}
	dir := "/admin/partitioned-topics/" + tenant + "/" + ns + "/" + domain
	names, err := b.cfg.Metadata.Children(ctx, dir)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return nil, fmt.Errorf("list partitioned topics of %s/%s: %w", tenant, ns, err)
	}
	for _, n := range names {
		topics = append(topics, domain+"://"+tenant+"/"+ns+"/"+n)
	}
	return topics, nil
}

// CreateTopic creates a non-partitioned topic, its managed ledger
// (admin.Topics).
// shadowSourceProperty marks a topic created as a shadow topic (Pulsar's
// PULSAR.SHADOW_SOURCE).
const shadowSourceProperty = "PULSAR.SHADOW_SOURCE"

func (b *Broker) CreateTopic(ctx context.Context, name string, props map[string]string) error {
	t, err := adminTopic(name)
	if err != nil {
		return err
	}
	if src, ok := props[shadowSourceProperty]; ok {
		// pulsar-admin topics create-shadow-topic: an ordinary topic
		// would silently not follow its source.
		return admin.Errorf(admin.ErrNotSupported, "create %s as a shadow topic of %s: shadow topics are not supported by this broker", name, src)
	}
	if err := b.createTopic(ctx, t); err != nil {
		return err
	}
	if len(props) == 0 {
		return nil
	}
	return b.UpdateTopicProperties(ctx, name, props, nil)
}

// DeleteTopic deletes a non-partitioned topic served here and its schema
// (admin.Topics).
func (b *Broker) DeleteTopic(ctx context.Context, name string, force bool) error {
	t, err := adminTopic(name)
	if err != nil {
		return err
	}
	if ok, err := b.isPartitioned(ctx, t); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("topic %s: %w as a partitioned topic: delete it with DELETE .../partitions", t, errExists)
		}
		return err
	}
	if err := b.deleteTopic(ctx, t, force); err != nil {
		return err
	}
	return b.deleteSchema(ctx, t)
}

// UpdatePartitions raises a partitioned topic's partition count; it can
// only grow (admin.Topics).
func (b *Broker) UpdatePartitions(ctx context.Context, name string, n int) error {
	t, err := adminTopic(name)
	if err != nil {
		return err
	}
	return b.updatePartitions(ctx, t, n)
}

// Terminate stops the topic's stream and answers its last message id
// (admin.Topics).
func (b *Broker) Terminate(ctx context.Context, name string) (admin.MessageID, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.MessageID{}, err
	}
	pos, err := t.ml.Terminate(ctx)
	if err != nil {
		return admin.MessageID{}, fmt.Errorf("terminate %s: %w", t.name, err)
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
	b.log.Info("topic terminated", "topic", t.name.String(), "last", pos.String())
	return messageIDOf(t.name, pos, -1), nil
}

// LastMessageID is the id of the topic's last message, the last of its
// batch (admin.Topics).
func (b *Broker) LastMessageID(ctx context.Context, name string) (admin.MessageID, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.MessageID{}, err
	}
	last := t.ml.LastConfirmed()
	batch := -1
	if e, err := t.ml.ReadEntry(ctx, last); err == nil {
		if n := entryInfoOf(e.Data).messages; n > 1 {
			batch = n - 1
		}
	}
	return messageIDOf(t.name, last, batch), nil
}

// MessageIDByTimestamp is the id of the first message published at or
// after ts, unix ms (admin.Topics; Pulsar's getMessageIdByTimestamp): a
// binary search over publish times, as a seek by time.
func (b *Broker) MessageIDByTimestamp(ctx context.Context, name string, ts int64) (admin.MessageID, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.MessageID{}, err
	}
	pos, found, err := t.ml.FindFirst(ctx, publishedAtOrAfter(uint64(ts)))
	if err != nil {
		return admin.MessageID{}, fmt.Errorf("topic %s: find by publish time: %w", t.name, err)
	}
	if !found {
		return admin.MessageID{}, fmt.Errorf("topic %s: no message published at or after %d: %w", t.name, ts, admin.ErrMessageNotFound)
	}
	return messageIDOf(t.name, pos, -1), nil
}

// UnloadTopic closes the topic here; its clients reconnect and it loads
// again (admin.Topics).
func (b *Broker) UnloadTopic(ctx context.Context, name string) {
	t, err := ParseTopicName(name)
	if err != nil {
		return // the admin layer checked the name
	}
	key := t.String()
	b.unloadWhere(ctx, func(x *topic) bool { return x.name.String() == key })
}

func messageIDOf(name TopicName, p managedledger.Position, batch int) admin.MessageID {
	partition := -1
	if _, i, ok := partitionOf(name); ok {
		partition = i
	}
	return admin.MessageID{LedgerID: p.LedgerID, EntryID: p.EntryID, PartitionIndex: partition, BatchIndex: batch}
}

// positionOf is where a message id points: pulsaradmin's Earliest (-1:-1)
// is before the first entry, Latest (max:max) after the last.
func positionOf(m admin.MessageID) managedledger.Position {
	return managedledger.Position{LedgerID: m.LedgerID, EntryID: m.EntryID}
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
	if err := b.admitNewTopics(ctx, name, 1); err != nil {
		return err
	}
	_, err := b.getTopic(ctx, name)
	return err
}

// isPartitioned reports whether name is a partitioned topic.
func (b *Broker) isPartitioned(ctx context.Context, name TopicName) (bool, error) {
	n, err := b.partitions(ctx, name)
	return n > 0, err
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
	b.namespaceTopicsChanged(name.Tenant, name.Namespace)
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
	b.namespaceTopicsChanged(name.Tenant, name.Namespace)
	return nil
}
