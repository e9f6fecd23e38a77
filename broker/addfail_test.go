package broker

// A failed add fences the topic (Pulsar's PersistentTopic.addFailed):
// nothing later from the producer is stored until it reconnects and the
// topic knows what was stored (issue 16, defect 3).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/bkproto"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// downTransport makes every bookie unreachable while down is set.
type downTransport struct {
	inner ledger.Transport
	down  atomic.Bool
}

func (d *downTransport) Send(id string, req *bkproto.Request, cb client.Callback) {
	if d.down.Load() {
		go cb(nil, fmt.Errorf("%w: test: bookie %s unreachable", client.ErrDisconnected, id))
		return
	}
	d.inner.Send(id, req, cb)
}

// bookieLedgersOver is managed ledgers over one in-process bookie reached
// through tr (always the bookie storage: the failure is a bookie's).
func bookieLedgersOver(t *testing.T) (managedledger.Factory, *downTransport) {
	t.Helper()
	meta, local := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, local, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(local) })
	tr := &downTransport{inner: local}
	store := meta.NewSession()
	lc, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: tr, Logger: ledgertest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(); store.Close() })
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MarkDeleteRate: 20, Logger: ledgertest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return f, tr
}

// rawSend sends one message of producer id with sequence id seq.
func (r *rawClient) rawSend(id, seq uint64) {
	r.t.Helper()
	entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("w"), SequenceId: &seq,
		PublishTime: ptr(uint64(1))}, fmt.Appendf(nil, "m%d", seq))
	if err != nil {
		r.t.Fatal(err)
	}
	hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
		ProducerId: &id, SequenceId: &seq}}, nil, len(entry))
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(append(hdr, entry...))
}

// answerTo reads until the SEND_RECEIPT or SEND_ERROR for seq; closed
// reports whether a CLOSE_PRODUCER came before it.
func (r *rawClient) answerTo(seq uint64) (answer *pb.BaseCommand, closed bool) {
	r.t.Helper()
	for {
		cmd, err := r.read()
		if err != nil {
			r.t.Fatalf("waiting for the answer to sequence id %d: %v", seq, err)
		}
		switch {
		case cmd.GetType() == pb.BaseCommand_CLOSE_PRODUCER:
			closed = true
		case cmd.GetType() == pb.BaseCommand_SEND_RECEIPT && cmd.GetSendReceipt().GetSequenceId() == seq,
			cmd.GetType() == pb.BaseCommand_SEND_ERROR && cmd.GetSendError().GetSequenceId() == seq:
			return cmd, closed
		}
	}
}

// producerAgain creates producer "w" as a reconnecting client does:
// again while the broker answers a retriable error. It returns the
// last_sequence_id the broker reports.
func (r *rawClient) producerAgain(topic string, id uint64) int64 {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for req := uint64(100); ; req++ {
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: &topic, ProducerId: &id, RequestId: &req, ProducerName: ptr("w")}})
		cmd, err := r.read()
		if err != nil {
			r.t.Fatal(err)
		}
		if cmd.GetType() == pb.BaseCommand_PRODUCER_SUCCESS {
			return cmd.GetProducerSuccess().GetLastSequenceId()
		}
		if cmd.GetType() != pb.BaseCommand_ERROR || cmd.GetError().GetError() != pb.ServerError_ServiceNotReady || time.Now().After(deadline) {
			r.t.Fatalf("PRODUCER answered %v", cmd)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storedSequenceIDs reads the topic's stream from the start.
func storedSequenceIDs(t *testing.T, ml managedledger.ManagedLedger) []uint64 {
	t.Helper()
	c, err := ml.NewNonDurableCursor(managedledger.Position{LedgerID: -1, EntryID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var out []uint64
	for {
		es, err := c.ReadEntries(context.Background(), 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		for _, e := range es {
			_, se, err := wire.ParseStoredEntry(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			var md pb.MessageMetadata
			if err := se.DecodeMetadata(&md); err != nil {
				t.Fatal(err)
			}
			out = append(out, md.GetSequenceId())
		}
	}
}

// TestFailedAddFencesTopic: sequence id 1 fails (its rollover fails: the
// bookie is unreachable); the producer's next SEND, once the bookie is
// back, must not be stored, or the client's resend of 1 is taken for a
// duplicate and 1 is lost. The client reconnects and resends 1 and 2 as
// a Pulsar client does; the stream must be 0 1 2.
func TestFailedAddFencesTopic(t *testing.T) {
	ledgers, tr := bookieLedgersOver(t)
	b := New(Config{ClusterName: "test", BrokerDeduplicationEnabled: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ledgers)
	url := serveTestBroker(t, b)
	const topic = "persistent://public/default/add-failed"
	r := dialRaw(t, url)
	r.connect()
	if got := r.producerAgain(topic, 1); got != -1 {
		t.Fatalf("new producer: last sequence id %d", got)
	}
	r.rawSend(1, 0)
	if cmd, _ := r.answerTo(0); cmd.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("sequence id 0: %v", cmd)
	}
	tr.down.Store(true)
	r.rawSend(1, 1)
	cmd, closed := r.answerTo(1)
	if cmd.GetType() != pb.BaseCommand_SEND_ERROR {
		t.Fatalf("sequence id 1 with the bookie unreachable: %v", cmd)
	}
	tr.down.Store(false)
	r.rawSend(1, 2) // sent before the client saw the error, say
	if !closed {
		// The producer is still open here: 2 is stored or refused.
		r.answerTo(2)
	} // else the SEND of a closed producer is refused or ignored

	r2 := dialRaw(t, url) // the client reconnects and resends what is pending
	r2.connect()
	last := r2.producerAgain(topic, 1)
	for seq := uint64(1); seq <= 2; seq++ {
		r2.rawSend(1, seq)
		if cmd, _ := r2.answerTo(seq); cmd.GetType() != pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("resend of %d: %v", seq, cmd)
		}
	}
	ml := b.loadedTopic(mustTopicName(t, topic)).ml
	if got := fmt.Sprint(storedSequenceIDs(t, ml)); got != "[0 1 2]" {
		t.Fatalf("stored sequence ids %s (the reconnected producer was told %d was its last): a message was lost", got, last)
	}
}
