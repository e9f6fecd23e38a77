package broker

// Admin calls that answer one stored message: GET .../ledger/{l}/entry/{e}
// (get message by id), GET .../examinemessage and the subscription peek
// (admin_subscriptions.go).
//
// Behaviour, as Pulsar answers them and pulsaradmin's handleResp reads
// them:
//   - The body is the entry's payload, decompressed: for a batch, its
//     [size][SingleMessageMetadata][payload]... records, which pulsaradmin
//     splits into messages.
//   - Headers: X-Pulsar-Message-ID (ledger:entry), X-Pulsar-Publish-Time
//     (ISO-8601), X-Pulsar-Num-Batch-Message for batches, X-Pulsar-Property
//     (the properties as one JSON object, which keeps the keys' case),
//     producer name, sequence id, event time and partition key when set.
//   - examinemessage: initialPosition earliest (default latest) and
//     messagePosition n (default 1): the n-th entry from the start, or the
//     n-th from the end (1 = the last).
//   - 404 when there is no such entry.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

func (b *Broker) httpMessageByID(w http.ResponseWriter, r *http.Request, name TopicName) {
	ledger, err1 := strconv.ParseInt(r.PathValue("ledger"), 10, 64)
	entry, err2 := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if err1 != nil || err2 != nil {
		adminError(w, badRequest("ledgerId/entryId", "want numbers, got %q/%q", r.PathValue("ledger"), r.PathValue("entry")))
		return
	}
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	pos := managedledger.Position{LedgerID: ledger, EntryID: entry}
	e, err := t.ml.ReadEntry(r.Context(), pos)
	if err != nil {
		adminError(w, fmt.Errorf("message %v of %s: %w (%v)", pos, name, errMessageNotFound, err))
		return
	}
	b.writeMessage(w, r, e)
}

func (b *Broker) httpExamineMessage(w http.ResponseWriter, r *http.Request, name TopicName) {
	q := r.URL.Query()
	initial := q.Get("initialPosition")
	if initial == "" {
		initial = "latest"
	}
	n, err := int64(1), error(nil)
	if s := q.Get("messagePosition"); s != "" {
		n, err = strconv.ParseInt(s, 10, 64)
	}
	if err != nil || n < 1 || (initial != "latest" && initial != "earliest") {
		adminError(w, badRequest("initialPosition/messagePosition", "want earliest or latest and a number from 1, got %q/%q",
			q.Get("initialPosition"), q.Get("messagePosition")))
		return
	}
	t, err := b.existingTopic(r.Context(), name)
	if err != nil {
		adminError(w, err)
		return
	}
	index := n - 1 // from the first stored entry
	if initial == "latest" {
		index = t.ml.Entries() - n
	}
	e, err := nthEntry(r.Context(), t.ml, index)
	if err != nil {
		adminError(w, fmt.Errorf("examine %s: %w", name, err))
		return
	}
	b.writeMessage(w, r, e)
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

// writeMessage answers one entry as Pulsar's message endpoints do.
func (b *Broker) writeMessage(w http.ResponseWriter, r *http.Request, e managedledger.Entry) {
	bem, parsed, err := wire.ParseStoredEntry(e.Data)
	var md pb.MessageMetadata
	if err == nil {
		err = parsed.DecodeMetadata(&md)
	}
	var payload []byte
	if err == nil {
		payload, err = b.inflate.decompress(r.Context(), md.GetCompression(), parsed.Payload(), int(md.GetUncompressedSize()))
	}
	if err != nil {
		adminError(w, fmt.Errorf("entry %v: %w", e.Position, err))
		return
	}
	messageHeaders(w.Header(), e.Position, &md)
	brokerEntryHeaders(w.Header(), bem)
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(payload)
}

// brokerEntryHeaders adds what Pulsar's admin API returns of the broker
// entry metadata.
func brokerEntryHeaders(h http.Header, bem []byte) {
	if bem == nil {
		return
	}
	var m pb.BrokerEntryMetadata
	if proto.Unmarshal(bem, &m) != nil {
		return
	}
	if m.BrokerTimestamp != nil {
		h.Set("X-Pulsar-Broker-Entry-METADATA-timestamp", strconv.FormatUint(m.GetBrokerTimestamp(), 10))
	}
	if m.Index != nil {
		h.Set("X-Pulsar-Broker-Entry-METADATA-index", strconv.FormatUint(m.GetIndex(), 10))
	}
}

func messageHeaders(h http.Header, pos managedledger.Position, md *pb.MessageMetadata) {
	h.Set("X-Pulsar-Message-ID", pos.String())
	h.Set("X-Pulsar-Publish-Time", time.UnixMilli(int64(md.GetPublishTime())).UTC().Format("2006-01-02T15:04:05.000Z"))
	h.Set("X-Pulsar-Producer-Name", md.GetProducerName())
	h.Set("X-Pulsar-Sequence-Id", strconv.FormatUint(md.GetSequenceId(), 10))
	if md.NumMessagesInBatch != nil {
		h.Set("X-Pulsar-Num-Batch-Message", strconv.Itoa(int(md.GetNumMessagesInBatch())))
	}
	if md.EventTime != nil {
		h.Set("X-Pulsar-Event-Time", time.UnixMilli(int64(md.GetEventTime())).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if md.PartitionKey != nil {
		h.Set("X-Pulsar-Partition-Key", md.GetPartitionKey())
	}
	if len(md.GetProperties()) > 0 {
		props := make(map[string]string, len(md.GetProperties()))
		for _, kv := range md.GetProperties() {
			props[kv.GetKey()] = kv.GetValue()
		}
		raw, _ := json.Marshal(props)
		h.Set("X-Pulsar-Property", string(raw))
	}
}
