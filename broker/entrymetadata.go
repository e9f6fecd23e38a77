package broker

// Broker entry metadata (Pulsar's brokerEntryMetadataInterceptors): with
// AppendBrokerTimestampMetadataInterceptor the broker stamps every entry
// with the time it stored it (broker_timestamp), with
// AppendIndexMetadataInterceptor with a per-topic message index (index:
// the index of the entry's last message, counting from 0 over the topic's
// life, a batch of N advancing it by N). The section is stored in front of
// the producer's bytes (wire/stored.go), so it survives restarts and
// ownership changes: a topic that loads again continues from the index in
// its last entry. When that entry is gone (every entry consumed and
// trimmed), the index comes from the properties of the topic's
// "pulsar.broker.index" cursor, which follows the last entry stored (so it
// pins nothing) and is persisted with it (at most a second behind, and on
// close), as Pulsar keeps the index in the managed ledger's properties.
// Consumers get it only when
// exposingBrokerEntryMetadataToClientEnabled is set and their client
// declared supports_broker_entry_metadata at CONNECT; others get the
// producer's bytes, as without interceptors.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// Interceptor names Pulsar's configuration uses (with or without the
// package), for brokerEntryMetadataInterceptors.
const (
	TimestampInterceptor = "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor"
	IndexInterceptor     = "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"
)

// ParseEntryMetadataInterceptors reads brokerEntryMetadataInterceptors (a
// comma-separated list of the two interceptors above) into the Config's
// BrokerEntryTimestamp and BrokerEntryIndex.
func ParseEntryMetadataInterceptors(list string) (timestamp, index bool, err error) {
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		short := name[strings.LastIndex(name, ".")+1:]
		switch {
		case name == "":
		case short == "AppendBrokerTimestampMetadataInterceptor":
			timestamp = true
		case short == "AppendIndexMetadataInterceptor":
			index = true
		default:
			return false, false, fmt.Errorf("brokerEntryMetadataInterceptors: unknown interceptor %q (known: %s, %s)",
				name, TimestampInterceptor, IndexInterceptor)
		}
	}
	return timestamp, index, nil
}

// entryStamper prefixes a topic's entries with broker entry metadata.
//
// Lock rules: mu is held from taking an index to handing the entry to the
// managed ledger, so indices grow in the order entries are stored (SENDs
// of one topic arrive on several connections' goroutines).
type entryStamper struct {
	timestamp, index bool
	now              func() time.Time
	cursor           managedledger.Cursor // indexCursor, with the index

	mu   sync.Mutex
	last int64 // index of the last message stored; -1 before the first
}

// indexCursor keeps the index when no entry does (Pulsar's name for the
// index it keeps in managed-ledger properties).
const (
	indexCursor   = "pulsar.broker.index"
	indexProperty = "index"
)

// newEntryStamper returns nil when no interceptor is configured; else one
// that continues from the topic's last index.
func newEntryStamper(ctx context.Context, cfg Config, ml managedledger.ManagedLedger) (*entryStamper, error) {
	if !cfg.BrokerEntryIndex {
		if err := dropSystemCursor(ctx, ml, indexCursor); err != nil {
			return nil, fmt.Errorf("delete the broker index cursor: %w", err)
		}
	}
	if !cfg.BrokerEntryTimestamp && !cfg.BrokerEntryIndex {
		return nil, nil
	}
	s := &entryStamper{timestamp: cfg.BrokerEntryTimestamp, index: cfg.BrokerEntryIndex, now: time.Now, last: -1}
	if !s.index {
		return s, nil
	}
	cur, err := ml.OpenCursor(ctx, indexCursor, managedledger.CursorOptions{Initial: managedledger.Latest})
	if err != nil {
		return nil, fmt.Errorf("open the broker index cursor: %w", err)
	}
	s.cursor = cur
	if v, ok := cur.Properties()[indexProperty]; ok {
		s.last = v
	}
	if ml.Entries() == 0 {
		return s, nil // nothing stored (or all trimmed): the cursor's index is all there is
	}
	e, err := ml.ReadEntry(ctx, ml.LastConfirmed())
	if err != nil {
		return nil, fmt.Errorf("read the last entry %v for its broker entry index: %w", ml.LastConfirmed(), err)
	}
	if bem, _, err := wire.ParseStoredEntry(e.Data); err == nil && bem != nil {
		var m pb.BrokerEntryMetadata
		if proto.Unmarshal(bem, &m) == nil && m.Index != nil {
			s.last = max(s.last, int64(m.GetIndex()))
		}
	}
	return s, nil
}

// add stores entry (the producer's bytes, which the caller may reuse
// afterwards) with its broker entry metadata in front.
func (s *entryStamper) add(ml managedledger.ManagedLedger, entry []byte, sum crc32c.Known, messages int64, cb func(managedledger.Position, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := uint64(s.now().UnixMilli())
	index := s.last + messages
	// Room in front for storage to encode its entry without a copy
	// (AddEntryInPlace).
	data := make([]byte, managedledger.EntryHeadroom, managedledger.EntryHeadroom+wire.BrokerEntryMetadataLen(ts, s.timestamp, index, s.index)+len(entry))
	data = wire.AppendBrokerEntryMetadata(data, ts, s.timestamp, index, s.index)
	sum = sum.After(data[managedledger.EntryHeadroom:], len(entry))
	data = append(data, entry...)
	// The index is taken even if the add fails: a gap in the indices is
	// harmless, a duplicate would not be.
	s.last = index
	if s.cursor == nil {
		ml.AddEntryInPlace(data, sum, cb)
		return
	}
	ml.AddEntryInPlace(data, sum, func(pos managedledger.Position, err error) {
		if err == nil { // callbacks run in storage order: the cursor only moves forward
			_ = s.cursor.MarkDeleteWithProperties(context.Background(), pos, map[string]int64{indexProperty: index})
		}
		cb(pos, err)
	})
}
