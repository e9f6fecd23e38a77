package broker

// Message deduplication (brokerDeduplicationEnabled): a producer's
// messages carry increasing sequence ids under its name; a SEND whose
// sequence id is not above the highest one already stored for that name is
// a duplicate (a resend after a reconnect) and is acknowledged without
// being stored again.
//
// State: per producer name, the highest sequence id pushed to storage
// (pending included: rejects duplicates racing their original) and the
// highest persisted (what PRODUCER_SUCCESS reports as last_sequence_id, so
// a reconnecting producer resumes after it).
//
// Snapshots, as Pulsar's: every brokerDeduplicationEntriesInterval stored
// entries, and at the first entry stored once the snapshot interval
// (the topic's deduplicationSnapshotInterval, else
// brokerDeduplicationSnapshotIntervalSeconds) has passed since the last
// one, the persisted map is written as the properties of the topic's
// "pulsar.dedup" cursor, marked deleted up to the entry stored last. A
// topic that loads takes the snapshot and replays only the entries after
// it; without a snapshot it replays the whole stored stream. The cursor
// also keeps the entries after the snapshot from being trimmed, so the
// replay finds them. It is not a subscription (admin lists skip it), and
// a topic loaded with deduplication off deletes it, so that it pins no
// ledgers.

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// dedupCursor is the snapshot cursor's name (Pulsar's).
const dedupCursor = "pulsar.dedup"

// Lock rules: mu guards the maps and the snapshot counter; the cursor is
// written only from the managed ledger's add callbacks (one at a time, in
// order), after mu is released.
type dedup struct {
	mu        sync.Mutex
	pushed    map[string]int64
	persisted map[string]int64
	since     int       // entries stored since the last snapshot
	last      time.Time // when the last snapshot was taken (or the state built)

	interval int           // brokerDeduplicationEntriesInterval
	every    time.Duration // the snapshot interval (0: by entries only)
	cursor   managedledger.Cursor
	replayed int // entries the last rebuild read (after the snapshot)
}

func newDedup(interval int, every time.Duration) *dedup {
	if interval <= 0 {
		interval = 1000
	}
	return &dedup{pushed: map[string]int64{}, persisted: map[string]int64{}, interval: interval, every: every,
		last: time.Now()}
}

// lastPersisted is the producer's highest stored sequence id, or -1.
func (d *dedup) lastPersisted(producer string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.persisted[producer]; ok {
		return v
	}
	return -1
}

// admission is what deduplication makes of a SEND.
type admission int

const (
	admitNew       admission = iota // store it
	admitDuplicate                  // stored before: acknowledge with -1:-1, store nothing
	admitUnknown                    // its original is still being stored: the client must resend later
)

// admit classifies a SEND by its sequence ids, and records a new one as
// pushed. A sequence id above the highest persisted but not above the
// highest pushed is neither new nor a known duplicate: its original is
// still pending and may yet fail (then the producer's retry must be
// stored). Answering it as a duplicate would acknowledge a message that
// is then lost, so it is refused with a retryable error, as Pulsar's
// MessageDupUnknownException is.
func (d *dedup) admit(producer string, seq, highest int64) admission {
	d.mu.Lock()
	defer d.mu.Unlock()
	last, ok := d.pushed[producer]
	if ok && seq <= last {
		if p, stored := d.persisted[producer]; stored && seq <= p {
			return admitDuplicate
		}
		return admitUnknown
	}
	d.pushed[producer] = max(seq, highest)
	return admitNew
}

// stored records a persisted SEND, stored at pos, and takes a snapshot
// every interval entries or once every has passed. Called in storage order.
func (d *dedup) stored(ctx context.Context, producer string, seq, highest int64, pos managedledger.Position) error {
	d.mu.Lock()
	d.persisted[producer] = max(d.persisted[producer], seq, highest)
	d.since++
	due := d.since >= d.interval
	if !due && d.every > 0 {
		due = time.Since(d.last) >= d.every
	}
	if !due || d.cursor == nil {
		d.mu.Unlock()
		return nil
	}
	d.since, d.last = 0, time.Now()
	snap := maps.Clone(d.persisted)
	d.mu.Unlock()
	return d.cursor.MarkDeleteWithProperties(ctx, pos, snap)
}

// failed forgets pushed but unstored sequence ids, so the producer's
// retry of a failed SEND is not taken for a duplicate.
func (d *dedup) failed(producer string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.persisted[producer]; ok {
		d.pushed[producer] = v
	} else {
		delete(d.pushed, producer)
	}
}

// resetPushed forgets every pushed but unstored sequence id: after a
// failed add, once every add made before it called back, the persisted
// map is exactly what was stored (Pulsar's resetHighestSequenceIdPushed).
func (d *dedup) resetPushed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pushed = maps.Clone(d.persisted)
}

// rebuild loads the last snapshot and replays the stored entries' producer
// names and sequence ids after it (all of them without a snapshot).
func (d *dedup) rebuild(ctx context.Context, ml managedledger.ManagedLedger) error {
	cur, err := ml.OpenCursor(ctx, dedupCursor, managedledger.CursorOptions{Initial: managedledger.Earliest})
	if err != nil {
		return err
	}
	d.cursor = cur
	start := managedledger.Position{LedgerID: -1, EntryID: -1}
	if snap := cur.Properties(); snap != nil {
		for producer, seq := range snap {
			d.persisted[producer], d.pushed[producer] = seq, seq
		}
		start = cur.MarkDeletePosition()
	}
	return scanEntriesAfter(ctx, ml, start, func(e managedledger.Entry) bool {
		d.replay(e.Data)
		d.replayed++
		return true
	})
}

// dropSystemCursor deletes a broker cursor (dedupCursor, indexCursor)
// of a topic loaded with its feature off, so that it pins no ledgers.
func dropSystemCursor(ctx context.Context, ml managedledger.ManagedLedger, name string) error {
	if err := ml.DeleteCursor(ctx, name); err != nil && !errors.Is(err, managedledger.ErrCursorNotFound) {
		return err
	}
	return nil
}

func (d *dedup) replay(data []byte) {
	_, e, err := wire.ParseStoredEntry(data)
	if err != nil {
		return
	}
	var md pb.MessageMetadata
	if e.DecodeMetadata(&md) != nil || md.ProducerName == nil {
		return
	}
	seq := int64(md.GetSequenceId())
	highest := max(seq, int64(md.GetHighestSequenceId()))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pushed[md.GetProducerName()] = max(d.pushed[md.GetProducerName()], highest)
	d.persisted[md.GetProducerName()] = max(d.persisted[md.GetProducerName()], highest)
}
