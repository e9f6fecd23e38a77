package perfledger

import (
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// addTimeout is the ledger client's: a bookie silent this long is
// replaced. Longer than the client's default so that a slow disk shows as
// latency rather than as an ensemble change (which the report counts).
const addTimeout = 30 * time.Second

// ackTimeout bounds the wait for any one callback: longer than an add
// timeout plus an ensemble change, so the client gives up first and the
// benchmark reports its error; past it the benchmark fails instead of
// hanging with a stuck client.
const ackTimeout = 2 * time.Minute

// writer appends to one ledger with up to cap(tokens) appends in flight.
// Entry ids are the handle's: the n-th append of a fresh ledger is entry
// n-1, which the callback confirms, so payloads can be checked later
// from the id alone.
type writer struct {
	ph     *perfkit.Phase
	h      *ledger.WriteHandle
	pat    *pattern
	size   int
	tokens chan struct{} // one per append that may be in flight
	tally  *perfkit.Tally
	// appended is how many appends run issued; read after run returns.
	appended int64
}

func newWriter(ph *perfkit.Phase, h *ledger.WriteHandle, pat *pattern, size, outstanding int) *writer {
	w := &writer{ph: ph, h: h, pat: pat, size: size, tokens: make(chan struct{}, outstanding), tally: perfkit.NewTally()}
	for range outstanding {
		w.tokens <- struct{}{}
	}
	return w
}

// run appends until the phase stops, then waits for every callback. The
// payload buffer is reused at once: AppendAsync encodes a copy.
func (w *writer) run() {
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	buf := make([]byte, w.size)
	for e := int64(0); ; e++ {
		if !w.take(timer) {
			break
		}
		if w.ph.Stopped() {
			w.tokens <- struct{}{}
			break
		}
		w.pat.fill(buf, w.h.ID(), e)
		start := time.Now()
		w.h.AppendAsync(buf, func(id int64, err error) { w.done(e, id, start, err) })
		w.appended++
	}
	for range cap(w.tokens) { // every callback has run once all tokens are back
		if !w.takeAny(timer) {
			return
		}
	}
}

// take waits for a token; false once the phase stops.
func (w *writer) take(timer *time.Timer) bool {
	timer.Reset(ackTimeout)
	select {
	case <-w.tokens:
		return true
	case <-w.ph.Done():
		return false
	case <-timer.C:
		w.ph.Fail(fmt.Errorf("ledger %d: no append completed within %s", w.h.ID(), ackTimeout))
		return false
	}
}

// takeAny waits for a token even after the phase stopped (draining).
func (w *writer) takeAny(timer *time.Timer) bool {
	timer.Reset(ackTimeout)
	select {
	case <-w.tokens:
		return true
	case <-timer.C:
		w.ph.Fail(fmt.Errorf("ledger %d: appends still in flight after %s", w.h.ID(), ackTimeout))
		return false
	}
}

// done runs on the handle's delivery goroutine, in entry order.
func (w *writer) done(e, id int64, start time.Time, err error) {
	d := time.Since(start)
	defer func() { w.tokens <- struct{}{} }() // never blocks: one token per append in flight
	switch {
	case err != nil:
		w.ph.Fail(fmt.Errorf("append to ledger %d entry %d: %w", w.h.ID(), e, err))
		return
	case id != e:
		w.ph.Fail(fmt.Errorf("ledger %d: append %d completed as entry %d", w.h.ID(), e, id))
		return
	}
	if w.ph.Measuring.Load() {
		w.tally.Record(d)
	}
	w.ph.Completed(w.size)
}
