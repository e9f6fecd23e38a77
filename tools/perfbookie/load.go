package perfbookie

import (
	"fmt"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/tools/perfkit"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// ackTimeout bounds the wait for any one answer: a bookie silent for this
// long has hung, and the benchmark fails instead of hanging with it.
const ackTimeout = 30 * time.Second

// masterKey is every benchmark ledger's: the bookie only checks that a
// ledger's adds agree on it.
const masterKey = "magnetar-perf-bookie"

// writer adds entries 0, 1, 2, ... to one ledger over its own connection.
// Entry e is sent only once every entry up to e-window is acknowledged, so
// at most window adds are outstanding and the head of each entry carries
// the LAC a ledger client would send: the highest entry below which
// everything is acknowledged. Entry buffers are a ring of window slots;
// the slot of entry e is free again because entry e-window is acknowledged.
type writer struct {
	ph     *perfkit.Phase
	cl     *client.Client
	pat    *pattern
	ledger int64
	size   int
	window int
	limit  int64 // entries to write; negative: until the phase stops
	key    []byte
	tally  *perfkit.Tally
	wake   chan struct{} // an acknowledgement arrived

	mu struct {
		sync.Mutex
		lac      int64  // every entry <= lac is acknowledged
		acked    []bool // by entry % window, for entries above lac
		bufs     [][]byte
		inflight int
		next     int64 // entries sent
	}
}

func newWriter(ph *perfkit.Phase, cl *client.Client, pat *pattern, ledger int64, size, window int, limit int64) *writer {
	w := &writer{ph: ph, cl: cl, pat: pat, ledger: ledger, size: size, window: window, limit: limit,
		key: []byte(masterKey), tally: perfkit.NewTally(), wake: make(chan struct{}, 1)}
	w.mu.lac = -1
	w.mu.acked = make([]bool, window)
	w.mu.bufs = make([][]byte, window)
	return w
}

// run sends until the phase stops or the limit is reached, then waits for
// every add in flight.
func (w *writer) run() {
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	for e := int64(0); w.limit < 0 || e < w.limit; e++ {
		buf, lac, ok := w.slot(e, timer)
		if !ok {
			break
		}
		w.pat.fill(buf, w.ledger, e, lac)
		start := time.Now()
		w.cl.Send(&bkproto.Request{Op: bkproto.OpAdd, LedgerID: w.ledger, EntryID: e, MasterKey: w.key, Data: buf},
			func(_ *bkproto.Response, err error) { w.done(e, start, err) })
	}
	w.await(timer, func() bool { return w.mu.inflight == 0 }, "the adds still in flight")
}

// slot waits until entry e may be sent and returns its buffer and the LAC
// to send with it; false if the phase stopped.
func (w *writer) slot(e int64, timer *time.Timer) ([]byte, int64, bool) {
	if !w.await(timer, func() bool { return e-w.mu.lac <= int64(w.window) || w.ph.Stopped() }, "an add") ||
		w.ph.Stopped() {
		return nil, 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := e % int64(w.window)
	if w.mu.bufs[i] == nil {
		w.mu.bufs[i] = make([]byte, w.size)
	}
	w.mu.inflight++
	w.mu.next = e + 1
	return w.mu.bufs[i], w.mu.lac, true
}

// await waits, under no lock, until cond (checked under w.mu) holds;
// false (and the phase failed) if no answer came for ackTimeout.
func (w *writer) await(timer *time.Timer, cond func() bool, what string) bool {
	for {
		w.mu.Lock()
		ok := cond()
		w.mu.Unlock()
		if ok {
			return true
		}
		timer.Reset(ackTimeout)
		select {
		case <-w.wake:
		case <-timer.C:
			w.ph.Fail(fmt.Errorf("ledger %d: no answer for %s within %s", w.ledger, what, ackTimeout))
			return false
		}
	}
}

// done runs on the client's reader goroutine for each answer.
func (w *writer) done(e int64, start time.Time, err error) {
	d := time.Since(start)
	if err == nil && w.ph.Measuring.Load() {
		w.tally.Record(d)
	}
	w.mu.Lock()
	w.mu.inflight--
	if err == nil {
		w.mu.acked[e%int64(w.window)] = true
		for w.mu.lac+1 < w.mu.next && w.mu.acked[(w.mu.lac+1)%int64(w.window)] {
			w.mu.acked[(w.mu.lac+1)%int64(w.window)] = false
			w.mu.lac++
		}
	}
	w.mu.Unlock()
	if err != nil {
		w.ph.Fail(fmt.Errorf("add ledger %d entry %d: %w", w.ledger, e, err))
	} else {
		w.ph.Completed(w.size)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// written is how many entries the writer's ledger holds (all were
// acknowledged once run returned without a failure).
func (w *writer) written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.lac + 1
}

// reader reads entries first..last of one ledger over its own connection
// with window reads in flight, checking every entry's bytes; with cycle it
// starts over after last until the phase stops.
type reader struct {
	ph          *perfkit.Phase
	cl          *client.Client
	pat         *pattern
	ledger      int64
	size        int
	first, last int64
	cycle       bool
	tally       *perfkit.Tally
	tokens      chan struct{} // one per read that may be in flight
}

func newReader(ph *perfkit.Phase, cl *client.Client, pat *pattern, ledger int64, size, window int, first, last int64, cycle bool) *reader {
	r := &reader{ph: ph, cl: cl, pat: pat, ledger: ledger, size: size, first: first, last: last, cycle: cycle,
		tally: perfkit.NewTally(), tokens: make(chan struct{}, window)}
	for range window {
		r.tokens <- struct{}{}
	}
	return r
}

func (r *reader) run() {
	timer := time.NewTimer(ackTimeout)
	defer timer.Stop()
	for e := r.first; !r.ph.Stopped(); e++ {
		if e > r.last {
			if !r.cycle {
				break
			}
			e = r.first
		}
		if !r.take(timer) {
			break
		}
		start := time.Now()
		r.cl.Send(&bkproto.Request{Op: bkproto.OpRead, LedgerID: r.ledger, EntryID: e},
			func(resp *bkproto.Response, err error) { r.done(e, start, resp, err) })
	}
	for range cap(r.tokens) { // wait for every read in flight
		if !r.take(timer) {
			return
		}
	}
}

func (r *reader) take(timer *time.Timer) bool {
	timer.Reset(ackTimeout)
	select {
	case <-r.tokens:
		return true
	case <-timer.C:
		r.ph.Fail(fmt.Errorf("ledger %d: no answer to a read within %s", r.ledger, ackTimeout))
		return false
	}
}

func (r *reader) done(e int64, start time.Time, resp *bkproto.Response, err error) {
	d := time.Since(start)
	defer func() { r.tokens <- struct{}{} }()
	if err == nil {
		err = r.pat.check(resp.Data, r.ledger, e, r.size)
	}
	if err != nil {
		r.ph.Fail(fmt.Errorf("read ledger %d entry %d: %w", r.ledger, e, err))
		return
	}
	if r.ph.Measuring.Load() {
		r.tally.Record(d)
	}
	r.ph.Completed(r.size)
}
