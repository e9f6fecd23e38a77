package admin

// Calls that answer one stored message: GET .../ledger/{l}/entry/{e}
// (get message by id), GET .../examinemessage and the subscription peek
// (subscriptions.go).
//
// Behavior, as Pulsar answers them and pulsaradmin's handleResp reads
// them:
//   - The body is the entry's payload, decompressed: for a batch, its
//     [size][SingleMessageMetadata][payload]... records, which pulsaradmin
//     splits into messages.
//   - Headers: X-Pulsar-Message-ID (ledger:entry), X-Pulsar-Publish-Time
//     (ISO-8601), X-Pulsar-Num-Batch-Message for batches, X-Pulsar-Property
//     (the properties as one JSON object, which keeps the keys' case),
//     producer name, sequence id, event time and partition key when set,
//     and the broker entry metadata's timestamp and index.
//   - examinemessage: initialPosition earliest (default latest) and
//     messagePosition n (default 1): the n-th entry from the start, or the
//     n-th from the end (1 = the last).
//   - 404 when there is no such entry.

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// Message is one stored entry, decoded by the broker.
type Message struct {
	// ID is the entry's position, ledger:entry.
	ID       string
	Metadata *pb.MessageMetadata
	// EntryMetadata is the broker entry metadata; nil if there is none.
	EntryMetadata *pb.BrokerEntryMetadata
	// Payload is decompressed.
	Payload []byte
}

func (a *brokerAPI) messageByID(w http.ResponseWriter, r *http.Request, topic string) {
	ledger, err1 := strconv.ParseInt(r.PathValue("ledger"), 10, 64)
	entry, err2 := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if err1 != nil || err2 != nil {
		a.fail(w, r, BadRequest("ledgerId/entryId", "want numbers, got %q/%q", r.PathValue("ledger"), r.PathValue("entry")))
		return
	}
	m, err := a.b.MessageByID(r.Context(), topic, ledger, entry)
	a.writeMessage(w, r, m, err)
}

func (a *brokerAPI) examineMessage(w http.ResponseWriter, r *http.Request, topic string) {
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
		a.fail(w, r, BadRequest("initialPosition/messagePosition", "want earliest or latest and a number from 1, got %q/%q",
			q.Get("initialPosition"), q.Get("messagePosition")))
		return
	}
	m, err := a.b.ExamineMessage(r.Context(), topic, initial == "earliest", n)
	a.writeMessage(w, r, m, err)
}

// writeMessage answers one entry as Pulsar's message endpoints do, or err.
func (a *brokerAPI) writeMessage(w http.ResponseWriter, r *http.Request, m Message, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	messageHeaders(w.Header(), m.ID, m.Metadata)
	brokerEntryHeaders(w.Header(), m.EntryMetadata)
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(m.Payload)
}

// brokerEntryHeaders adds what Pulsar's admin API returns of the broker
// entry metadata.
func brokerEntryHeaders(h http.Header, m *pb.BrokerEntryMetadata) {
	if m == nil {
		return
	}
	if m.BrokerTimestamp != nil {
		h.Set("X-Pulsar-Broker-Entry-METADATA-timestamp", strconv.FormatUint(m.GetBrokerTimestamp(), 10))
	}
	if m.Index != nil {
		h.Set("X-Pulsar-Broker-Entry-METADATA-index", strconv.FormatUint(m.GetIndex(), 10))
	}
}

func messageHeaders(h http.Header, id string, md *pb.MessageMetadata) {
	h.Set("X-Pulsar-Message-ID", id)
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
