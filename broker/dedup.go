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
// a reconnecting producer resumes after it). It is rebuilt when a topic is
// loaded by reading the stored entries' metadata, so it survives a topic
// reload; with ledger-backed storage the replay will start from a
// snapshot instead of the beginning.

import (
	"context"
	"sync"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

type dedup struct {
	mu        sync.Mutex
	pushed    map[string]int64
	persisted map[string]int64
}

func newDedup() *dedup {
	return &dedup{pushed: map[string]int64{}, persisted: map[string]int64{}}
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

// admit reports whether a SEND with these sequence ids is new, and
// records it as pushed if so.
func (d *dedup) admit(producer string, seq, highest int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	last, ok := d.pushed[producer]
	if ok && seq <= last {
		return false
	}
	d.pushed[producer] = max(seq, highest)
	return true
}

// stored records a persisted SEND.
func (d *dedup) stored(producer string, seq, highest int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.persisted[producer] = max(d.persisted[producer], seq, highest)
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

// rebuild replays the stored entries' producer names and sequence ids.
func (d *dedup) rebuild(ctx context.Context, ml managedledger.ManagedLedger) error {
	return scanEntries(ctx, ml, func(e managedledger.Entry) bool {
		d.replay(e.Data)
		return true
	})
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
