package broker

// Namespace and subscription-position commands: GET_TOPICS_OF_NAMESPACE,
// SEEK.
//
// Behaviour:
//   - GET_TOPICS_OF_NAMESPACE lists the namespace's persistent topics (the
//     stored ones, the loaded ones and every partition of its partitioned
//     topics, which Pulsar creates with the partitioned topic, so that a
//     pattern consumer finds partitions nothing has written to yet); a
//     topics pattern is applied as Pulsar applies it (topicwatch.go), with
//     the list's hash; without one the pattern is left to the client
//     (filtered=false), as the protocol allows.
//   - SEEK (by message id or publish time) resets the subscription so that
//     the next message read is the target, closes the subscription's
//     consumers, then answers SUCCESS: the clients resubscribe from the new
//     position and drop what they had buffered.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

func (c *serverConn) handleGetTopicsOfNamespace(cmd *pb.CommandGetTopicsOfNamespace) error {
	reqID := cmd.GetRequestId()
	tenant, ns, err := parseNamespace(cmd.GetNamespace())
	if err != nil {
		return c.sendError(reqID, pb.ServerError_InvalidTopicName, err.Error())
	}
	// Bounded with lookups, as Pulsar bounds it (maxConcurrentLookupRequest),
	// and off the event loop: listing reads the metadata store.
	if !c.b.lookups.TryAcquire(1) {
		return c.sendError(reqID, pb.ServerError_TooManyRequests,
			fmt.Sprintf("too many lookups in progress (maxConcurrentLookupRequest %d)", c.b.cfg.MaxConcurrentLookupRequest))
	}
	c.goSafe("GET_TOPICS_OF_NAMESPACE", func() {
		defer c.b.lookups.Release(1)
		if z := c.b.cfg.Authorization; z != nil { // reads the namespace's grants
			if err := z.AllowNamespaceTopicsAs(c.ctx, c.connSubject(), tenant, ns); err != nil {
				_ = c.sendError(reqID, authErrorCode(err), err.Error())
				return
			}
		}
		resp, err := c.b.topicsOfNamespace(c.ctx, tenant, ns, cmd)
		if err != nil {
			_ = c.sendError(reqID, pb.ServerError_MetadataError, err.Error())
			return
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE.Enum(), GetTopicsOfNamespaceResponse: resp})
	})
	return nil
}

// topicsOfNamespace answers GET_TOPICS_OF_NAMESPACE. As Pulsar's
// broker-side pattern evaluation: a pattern up to
// subscriptionPatternMaxLength is applied here (filtered); the hash of
// what is answered lets a client that has it already get no list
// (changed=false).
func (b *Broker) topicsOfNamespace(ctx context.Context, tenant, ns string, cmd *pb.CommandGetTopicsOfNamespace) (*pb.CommandGetTopicsOfNamespaceResponse, error) {
	var topics []string
	if cmd.GetMode() != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		var err error
		if topics, err = b.persistentTopics(ctx, tenant, ns); err != nil {
			return nil, err
		}
	}
	if cmd.GetMode() != pb.CommandGetTopicsOfNamespace_PERSISTENT {
		topics = append(topics, b.loadedNonPersistentTopics(tenant, ns)...)
	}
	sort.Strings(topics)
	filtered := false
	if p := cmd.GetTopicsPattern(); p != "" && len(p) <= subscriptionPatternMaxLength {
		re, err := compileTopicsPattern(p)
		if err != nil {
			return nil, err
		}
		topics, filtered = filterTopics(topics, re), true
	}
	hash := topicsHash(topics)
	changed := cmd.TopicsHash == nil || cmd.GetTopicsHash() != hash
	if !changed {
		topics = nil
	}
	reqID := cmd.GetRequestId()
	return &pb.CommandGetTopicsOfNamespaceResponse{RequestId: &reqID, Topics: topics, Filtered: &filtered,
		Changed: &changed, TopicsHash: &hash}, nil
}

// subscriptionPatternMaxLength is Pulsar's default: longer patterns are
// left to the client.
const subscriptionPatternMaxLength = 50

// loadedNonPersistentTopics lists tenant/ns's non-persistent topics loaded
// here (they exist only while loaded).
func (b *Broker) loadedNonPersistentTopics(tenant, ns string) []string {
	var out []string
	for _, t := range b.loadedTopics() {
		if t.name.Tenant == tenant && t.name.Namespace == ns && !t.name.Persistent() {
			out = append(out, t.name.String())
		}
	}
	sort.Strings(out)
	return out
}

// persistentTopics lists tenant/ns's persistent topics by full name.
func (b *Broker) persistentTopics(ctx context.Context, tenant, ns string) ([]string, error) {
	seen := map[string]bool{}
	if l, ok := b.ledgers.(managedledger.Lister); ok {
		prefix := managedLedgerPrefix(tenant, ns, "persistent")
		names, err := l.List(ctx, prefix)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if local, ok := localNameOf(n, prefix); ok {
				seen["persistent://"+tenant+"/"+ns+"/"+local] = true
			}
		}
	}
	b.mu.Lock()
	for _, t := range b.topics {
		if t.name.Tenant == tenant && t.name.Namespace == ns && t.name.Persistent() {
			seen[t.name.String()] = true
		}
	}
	b.mu.Unlock()
	partitions, err := b.partitionsOfNamespace(ctx, tenant, ns)
	if err != nil {
		return nil, err
	}
	for _, p := range partitions {
		seen[p] = true
	}
	topics := make([]string, 0, len(seen))
	for t := range seen {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	return topics, nil
}

func (c *serverConn) handleSeek(cmd *pb.CommandSeek) error {
	reqID := cmd.GetRequestId()
	// A SEEK that cannot be served is answered as Pulsar answers it:
	// MetadataError without a target or for no consumer of this connection.
	if cmd.MessageId == nil && cmd.MessagePublishTime == nil {
		return c.sendError(reqID, pb.ServerError_MetadataError, "Message id and message publish time were not present")
	}
	cs := c.consumer(cmd.GetConsumerId())
	if cs == nil {
		return c.sendError(reqID, pb.ServerError_MetadataError, "Consumer not found")
	}
	// The consumer's own SEEK shows its client handles the consumer's
	// commands (as a FLOW does): its close below must not be held for a
	// FLOW, or the answer would overtake it.
	cs.flowed.Store(true)
	c.goSafe("SEEK", func() {
		target, err := seekTarget(c.ctx, cs.sub.topic.ml, cmd)
		if err == nil {
			err = cs.sub.seek(c.ctx, target)
		}
		if err != nil {
			_ = c.sendError(reqID, pb.ServerError_UnknownError, err.Error())
			return
		}
		// Consumers are closed before the answer, as Pulsar's resetCursor
		// does: the client reconnects before it sees the SEEK succeed, so
		// its next command on the consumer does not race the reconnect.
		cs.sub.disconnectConsumers()
		if !cs.sub.durable {
			time.AfterFunc(readerReturnWindow, cs.sub.closeIfAbandoned)
		}
		_ = c.sendSuccess(reqID)
	})
	return nil
}

// seekTarget is the position a SEEK asks for: the message id itself, or
// the first entry published at or after the time.
func seekTarget(ctx context.Context, ml managedledger.ManagedLedger, cmd *pb.CommandSeek) (managedledger.Position, error) {
	if id := cmd.GetMessageId(); id != nil {
		return position(id), nil
	}
	if cmd.MessagePublishTime == nil {
		return managedledger.Position{}, fmt.Errorf("SEEK needs a message id or a publish time")
	}
	return findByPublishTime(ctx, ml, cmd.GetMessagePublishTime())
}

// findByPublishTime finds the first entry published at or after t
// (milliseconds); past the end it returns the next position. It reads
// O(log n) entries (a binary search, as Pulsar's): it assumes publish
// times grow along the stream, which broker timestamps
// (brokerEntryMetadataInterceptors) guarantee and producers' clocks
// nearly do.
func findByPublishTime(ctx context.Context, ml managedledger.ManagedLedger, t uint64) (managedledger.Position, error) {
	pos, _, err := ml.FindFirst(ctx, publishedAtOrAfter(t))
	return pos, err
}

func publishedAtOrAfter(t uint64) func(managedledger.Entry) (bool, error) {
	return func(e managedledger.Entry) (bool, error) { return publishTime(e.Data) >= t, nil }
}

// positionBefore is the stored entry just before pos (false when pos is
// the first one).
func positionBefore(ml managedledger.ManagedLedger, pos managedledger.Position) (managedledger.Position, bool) {
	if pos.EntryID > 0 {
		return managedledger.Position{LedgerID: pos.LedgerID, EntryID: pos.EntryID - 1}, true
	}
	lister, ok := ml.(managedledger.LedgerLister)
	if !ok {
		return managedledger.Position{}, false
	}
	var prev *managedledger.LedgerInfo
	for _, l := range lister.Ledgers() {
		if l.ID == pos.LedgerID {
			break
		}
		if l.Entries > 0 {
			prev = &l
		}
	}
	if prev == nil {
		return managedledger.Position{}, false
	}
	return managedledger.Position{LedgerID: prev.ID, EntryID: prev.Entries - 1}, true
}

// scanEntriesAfter reads the stored stream after start, calling fn for
// each entry until it returns false. Only the deduplication rebuild uses
// it (searches by time are binary, findByPublishTime).
func scanEntriesAfter(ctx context.Context, ml managedledger.ManagedLedger, start managedledger.Position, fn func(managedledger.Entry) bool) error {
	cur, err := ml.NewNonDurableCursor(start)
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	for {
		entries, err := cur.ReadEntries(ctx, 100, 16<<20)
		if err != nil || len(entries) == 0 {
			return err
		}
		for _, e := range entries {
			if !fn(e) {
				return nil
			}
		}
	}
}

// publishTime is an entry's time for seeks and expiry: the broker's
// timestamp when it stored one (brokerEntryMetadataInterceptors), as
// Pulsar prefers it, else the producer's publish time.
func publishTime(data []byte) uint64 {
	bem, e, err := wire.ParseStoredEntry(data)
	if err != nil {
		return 0
	}
	if bem != nil {
		var m pb.BrokerEntryMetadata
		if proto.Unmarshal(bem, &m) == nil && m.BrokerTimestamp != nil {
			return m.GetBrokerTimestamp()
		}
	}
	var md pb.MessageMetadata
	if e.DecodeMetadata(&md) != nil {
		return 0
	}
	return md.GetPublishTime()
}
