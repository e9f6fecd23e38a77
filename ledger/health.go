package ledger

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// slowAfter: a bookie with requests outstanding that has answered
// nothing for this long is taken as stalled (stopped, overloaded, cut off
// without a broken connection) when reads choose whom to ask first.
const slowAfter = 500 * time.Millisecond

// healthTransport wraps the client's transport to see, per bookie, how
// many requests are outstanding and when it last answered: reads ask a
// stalled bookie last (BookKeeper's reorderReadSequence), instead of
// waiting the speculative read timeout on it first.
//
// No locks: by is a sync.Map (every add and read looks its bookie up, so
// a mutex here would be one more shared lock on the hot path), and a
// bookieHealth's fields are atomics.
type healthTransport struct {
	inner Transport
	by    sync.Map // bookie id -> *bookieHealth
	now   func() time.Time
}

type bookieHealth struct {
	outstanding atomic.Int64
	lastAnswer  atomic.Int64 // unix nanoseconds of the last answer (or of the first send)
}

func newHealthTransport(inner Transport) *healthTransport {
	return &healthTransport{inner: inner, now: time.Now}
}

func (h *healthTransport) of(id string) *bookieHealth {
	if b, ok := h.by.Load(id); ok {
		return b.(*bookieHealth)
	}
	fresh := &bookieHealth{}
	fresh.lastAnswer.Store(h.now().UnixNano())
	b, _ := h.by.LoadOrStore(id, fresh)
	return b.(*bookieHealth)
}

// Send implements Transport.
func (h *healthTransport) Send(id string, req *bkproto.Request, cb client.Callback) {
	b := h.of(id)
	if b.outstanding.Add(1) == 1 {
		// Idle until now: its silence starts with this request.
		b.lastAnswer.Store(h.now().UnixNano())
	}
	h.inner.Send(id, req, func(resp *bkproto.Response, err error) {
		b.lastAnswer.Store(h.now().UnixNano())
		b.outstanding.Add(-1)
		cb(resp, err)
	})
}

// stalled reports whether id has requests outstanding and has answered
// none for slowAfter.
func (h *healthTransport) stalled(id string) bool {
	v, ok := h.by.Load(id)
	if !ok {
		return false
	}
	b := v.(*bookieHealth)
	if b.outstanding.Load() == 0 {
		return false
	}
	return h.now().Sub(time.Unix(0, b.lastAnswer.Load())) > slowAfter
}

// readOrder is ws with stalled bookies moved last (the others keep their
// order); ws itself is not changed.
func (h *healthTransport) readOrder(ws []string) []string {
	var healthy, slow []string
	for _, b := range ws {
		if h.stalled(b) {
			slow = append(slow, b)
		} else {
			healthy = append(healthy, b)
		}
	}
	if len(slow) == 0 {
		return ws
	}
	return append(healthy, slow...)
}
