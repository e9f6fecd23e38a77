package broker

// The admin calls that answer one stored message (admin.Messages) and
// the subscription peek: the entry is read here and decoded (metadata,
// broker entry metadata, payload decompressed); package broker/admin
// writes it as Pulsar's message endpoints do. A missing entry is
// errMessageNotFound.

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// MessageByID reads the entry ledger:entry of a topic (admin.Messages).
func (b *Broker) MessageByID(ctx context.Context, name string, ledger, entry int64) (admin.Message, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.Message{}, err
	}
	pos := managedledger.Position{LedgerID: ledger, EntryID: entry}
	e, err := t.ml.ReadEntry(ctx, pos)
	if err != nil {
		return admin.Message{}, fmt.Errorf("message %v of %s: %w (%v)", pos, t.name, errMessageNotFound, err)
	}
	return b.messageOf(ctx, e)
}

// ExamineMessage reads the n-th entry (from 1) from the start, or from
// the end unless earliest (admin.Messages).
func (b *Broker) ExamineMessage(ctx context.Context, name string, earliest bool, n int64) (admin.Message, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.Message{}, err
	}
	index := n - 1 // from the first stored entry
	if !earliest {
		index = t.ml.Entries() - n
	}
	e, err := nthEntry(ctx, t.ml, index)
	if err != nil {
		return admin.Message{}, fmt.Errorf("examine %s: %w", t.name, err)
	}
	return b.messageOf(ctx, e)
}

// nthEntry reads the stored entry at index i (0: the first).
func nthEntry(ctx context.Context, ml managedledger.ManagedLedger, i int64) (managedledger.Entry, error) {
	if i < 0 {
		return managedledger.Entry{}, fmt.Errorf("entry %d from the start: %w", i+1, errMessageNotFound)
	}
	cur, err := ml.NewNonDurableCursor(managedledger.Position{LedgerID: -1, EntryID: -1})
	if err != nil {
		return managedledger.Entry{}, err
	}
	defer cur.Close(ctx)
	// Skipping acknowledges on this private cursor only: it walks ranges,
	// not entries, so nothing before i is read.
	if err := cur.SkipEntries(ctx, i); err != nil {
		return managedledger.Entry{}, err
	}
	entries, err := cur.ReadEntries(ctx, 1, 1)
	if err != nil {
		return managedledger.Entry{}, err
	}
	if len(entries) == 0 {
		return managedledger.Entry{}, fmt.Errorf("entry %d from the start: %w", i+1, errMessageNotFound)
	}
	return entries[0], nil
}

// nthUnacknowledged reads the n-th entry (from 1) that the cursor has not
// acknowledged.
func nthUnacknowledged(ctx context.Context, ml managedledger.ManagedLedger, c managedledger.Cursor, n int) (managedledger.Entry, error) {
	scan, err := ml.NewNonDurableCursor(c.MarkDeletePosition())
	if err != nil {
		return managedledger.Entry{}, err
	}
	defer scan.Close(ctx)
	for {
		entries, err := scan.ReadEntries(ctx, 100, 16<<20)
		if err != nil {
			return managedledger.Entry{}, err
		}
		if len(entries) == 0 {
			return managedledger.Entry{}, fmt.Errorf("unacknowledged entry %d: %w", n, errMessageNotFound)
		}
		for _, e := range entries {
			if c.IsAcknowledged(e.Position) {
				continue
			}
			if n--; n == 0 {
				return e, nil
			}
		}
	}
}

// messageOf decodes one entry for the admin API: its metadata, broker
// entry metadata (nil when absent or unreadable) and payload,
// decompressed.
func (b *Broker) messageOf(ctx context.Context, e managedledger.Entry) (admin.Message, error) {
	bem, parsed, err := wire.ParseStoredEntry(e.Data)
	md := &pb.MessageMetadata{}
	if err == nil {
		err = parsed.DecodeMetadata(md)
	}
	var payload []byte
	if err == nil {
		payload, err = b.inflate.decompress(ctx, md.GetCompression(), parsed.Payload(), int(md.GetUncompressedSize()))
	}
	if err != nil {
		return admin.Message{}, fmt.Errorf("entry %v: %w", e.Position, err)
	}
	m := admin.Message{ID: e.Position.String(), Metadata: md, Payload: payload}
	if bem != nil {
		var em pb.BrokerEntryMetadata
		if proto.Unmarshal(bem, &em) == nil {
			m.EntryMetadata = &em
		}
	}
	return m, nil
}
