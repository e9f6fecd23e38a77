package perfclient

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestOutgoingReuseStartsClean: a reused message carries nothing of its
// last send (transaction, holder, stamp), and its payload is the template
// stamped with the new send time, so a consumer's e2e latency is the new
// send's.
func TestOutgoingReuseStartsClean(t *testing.T) {
	cfg := DefaultConfig(ModeProduce)
	r := newRunner(cfg)
	first := time.Unix(0, 1_000_000_123)
	m := r.outgoing.get(first)
	checkStamped(t, r, m, first)
	m.holder = &holder{}
	m.msg.Transaction = struct{ pulsar.Transaction }{}
	m.msg.Properties = map[string]string{"k": "v"}
	r.outgoing.put(m)

	for i := range 100 { // the pool may hand out m or a new one
		at := first.Add(time.Duration(i+1) * time.Millisecond)
		m := r.outgoing.get(at)
		checkStamped(t, r, m, at)
		if m.msg.Transaction != nil || m.msg.Properties != nil || m.holder != nil {
			t.Fatalf("reused message keeps its last send's state: %+v", m)
		}
		if m.onReceipt == nil || m.runner != r {
			t.Fatalf("message not bound to its runner: %+v", m)
		}
		r.outgoing.put(m)
	}
}

func checkStamped(t *testing.T, r *runner, m *outgoing, at time.Time) {
	t.Helper()
	if &m.msg.Payload[0] != &m.payload[0] {
		t.Fatal("the message does not send the outgoing's payload")
	}
	if got := int64(binary.BigEndian.Uint64(m.payload)); got != at.UnixNano() {
		t.Fatalf("payload stamped %d, want %d", got, at.UnixNano())
	}
	if !bytes.Equal(m.payload[TimestampBytes:], r.template[TimestampBytes:]) || len(m.payload) != len(r.template) {
		t.Fatal("payload past the stamp differs from the template")
	}
	if !m.sent.Equal(at) {
		t.Fatalf("sent %v, want %v", m.sent, at)
	}
}
