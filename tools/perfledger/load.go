package perfledger

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
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

// histMaxUS is the top of perfdisk.NewHist's range; longer latencies are
// clamped to it rather than dropped.
const histMaxUS = 60_000_000

// phase is one point's load: its writers share the measuring and stop
// flags, the first failure, and the counters the live line reads.
type phase struct {
	measuring atomic.Bool
	stopped   atomic.Bool
	stop      chan struct{} // closed by halt: writers append no more
	stopOnce  sync.Once
	ops       atomic.Int64 // completed appends, measured or not
	bytes     atomic.Int64

	mu struct {
		sync.Mutex
		err error
	}
}

func newPhase() *phase { return &phase{stop: make(chan struct{})} }

func (p *phase) halt() {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		close(p.stop)
	})
}

func (p *phase) fail(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = err
	}
	p.mu.Unlock()
	p.halt()
}

func (p *phase) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err
}

// sleep waits d, or less if the phase stops.
func (p *phase) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stop:
	}
}

// tally is one writer's measured results. Callbacks record into it on the
// handle's delivery goroutine; the driver reads it after the writer
// drained.
type tally struct {
	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	measured int64
}

func newTally() *tally { return &tally{hist: perfdisk.NewHist()} }

func (t *tally) record(d time.Duration) {
	us := min(max(d.Microseconds(), 1), histMaxUS)
	t.mu.Lock()
	_ = t.hist.RecordValue(us) // in range by the clamp above
	t.measured++
	t.mu.Unlock()
}

// merge sums tallies into one histogram and count.
func merge(ts []*tally) (*hdrhistogram.Histogram, int64) {
	h := perfdisk.NewHist()
	var n int64
	for _, t := range ts {
		t.mu.Lock()
		h.Merge(t.hist)
		n += t.measured
		t.mu.Unlock()
	}
	return h, n
}

// writer appends to one ledger with up to cap(tokens) appends in flight.
// Entry ids are the handle's: the n-th append of a fresh ledger is entry
// n-1, which the callback confirms, so payloads can be checked later
// from the id alone.
type writer struct {
	ph     *phase
	h      *ledger.WriteHandle
	pat    *pattern
	size   int
	tokens chan struct{} // one per append that may be in flight
	tally  *tally
	// appended is how many appends run issued; read after run returns.
	appended int64
}

func newWriter(ph *phase, h *ledger.WriteHandle, pat *pattern, size, outstanding int) *writer {
	w := &writer{ph: ph, h: h, pat: pat, size: size, tokens: make(chan struct{}, outstanding), tally: newTally()}
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
		if w.ph.stopped.Load() {
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
	case <-w.ph.stop:
		return false
	case <-timer.C:
		w.ph.fail(fmt.Errorf("ledger %d: no append completed within %s", w.h.ID(), ackTimeout))
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
		w.ph.fail(fmt.Errorf("ledger %d: appends still in flight after %s", w.h.ID(), ackTimeout))
		return false
	}
}

// done runs on the handle's delivery goroutine, in entry order.
func (w *writer) done(e, id int64, start time.Time, err error) {
	d := time.Since(start)
	defer func() { w.tokens <- struct{}{} }() // never blocks: one token per append in flight
	switch {
	case err != nil:
		w.ph.fail(fmt.Errorf("append to ledger %d entry %d: %w", w.h.ID(), e, err))
		return
	case id != e:
		w.ph.fail(fmt.Errorf("ledger %d: append %d completed as entry %d", w.h.ID(), e, id))
		return
	}
	if w.ph.measuring.Load() {
		w.tally.record(d)
	}
	w.ph.ops.Add(1)
	w.ph.bytes.Add(int64(w.size))
}
