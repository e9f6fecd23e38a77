package perfclient

import (
	"bytes"
	"encoding/binary"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// An outgoing message is a send's whole state (its ProducerMessage, its
// payload and what its receipt records), reused once the receipt came.
// A load generator that allocated them per message (the payload, the
// message, the callback's closure: 1.3 KiB at 1 KiB payloads) was 38% of
// its own allocation in a produce run at 40,000 msg/s and set how often
// its collector stopped the world, which is the latency tail measured.
//
// Reuse is safe from the receipt on: the Go client copies a payload into
// its batch (or, unbatched, into the frame) when it takes the message, and
// drops the ProducerMessage once the callback returns (sendRequest.done
// resets itself after calling back).
type outgoing struct {
	runner   *runner
	msg      pulsar.ProducerMessage
	payload  []byte
	sent     time.Time
	client   int
	inWindow bool
	// holder, if not nil, holds the producer for the message's
	// transaction and is told of the receipt. A message in a transaction
	// (msg.Transaction set) counts at its commit, not at its receipt.
	holder *holder
	// onReceipt is o.receipted, bound once so that a send allocates no
	// closure.
	onReceipt func(pulsar.MessageID, *pulsar.ProducerMessage, error)
}

// outgoings is a pool of outgoing messages with payloads of one size.
type outgoings struct {
	pool sync.Pool
}

func newOutgoings(r *runner) *outgoings {
	o := &outgoings{}
	o.pool.New = func() any {
		// The template is copied once: only the stamp changes between
		// sends (the client reads a payload, never writes it).
		m := &outgoing{runner: r, payload: bytes.Clone(r.template)}
		m.msg.Payload = m.payload
		m.onReceipt = m.receipted
		return m
	}
	return o
}

// get returns a message whose payload is the template stamped with sent.
func (o *outgoings) get(sent time.Time) *outgoing {
	m := o.pool.Get().(*outgoing)
	binary.BigEndian.PutUint64(m.payload, uint64(sent.UnixNano()))
	m.sent = sent
	return m
}

// put returns m to the pool with nothing of its send left (a transaction
// it was in can be collected).
func (o *outgoings) put(m *outgoing) {
	m.msg, m.holder = pulsar.ProducerMessage{Payload: m.payload}, nil
	o.pool.Put(m)
}

// receipted records the send's outcome and returns m to its pool.
func (m *outgoing) receipted(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
	r := m.runner
	if m.msg.Transaction != nil {
		if m.holder != nil {
			m.holder.received()
		}
		if err != nil {
			r.warnOnce("publish in a transaction", err)
		}
		r.outgoing.put(m)
		return
	}
	r.acked(m.client, m.sent, len(m.payload), m.inWindow, err)
	r.outgoing.put(m)
	r.inflight.Done()
}
