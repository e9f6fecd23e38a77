package ledger

import (
	"fmt"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/internal/gopool"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// LocalBookie is a bookie running in this process, as LocalTransport calls
// it: *bookie.Core implements it (asserted in package bookie's tests). The
// interface keeps this client free of any bookie server code.
type LocalBookie interface {
	// Handle serves one request and calls reply exactly once, possibly on
	// another goroutine and after Handle returned. It may block on storage
	// or the journal. Slices in req must stay valid until reply is called,
	// and an add's Data never changes afterwards: the bookie's storage
	// keeps it rather than a copy (entrylog.KeepingAdder). The writer
	// encodes each entry once and only ever sends those bytes again.
	Handle(req *bkproto.Request, reply func(*bkproto.Response))
}

// LocalTransport reaches bookies running in this process by calling their
// request handlers directly: no socket, no encoding (standalone runs its
// bookie this way). Requests run the same bookie code as over the network.
type LocalTransport struct {
	mu    sync.RWMutex
	cores map[string]*localBookie
	// Requests other than adds run on reused goroutines: a fresh one per
	// request grew its stack through the bookie's code every time.
	workers *gopool.Pool
	closed  bool // guarded by mu: adds go to workers after Close
	// stages, when set, times each add's wait for its bookie's add
	// goroutine (stage.BookieQueue): under load the adds are quick and
	// the wait is for a processor, which nothing else shows.
	stages *stage.Recorder // guarded by mu
}

// localBookie is a bookie of this process and the goroutine that runs its
// adds. Adds run one after another on that goroutine, in the order sent:
// under load it finds the next add queued and runs it without a hand-off,
// where a goroutine per add had each wait for the scheduler (on two busy
// cores, most of an add's time in the broker). A full queue, or an add
// sent while the goroutine is stopping, runs on a pooled goroutine
// instead, so Send never blocks.
type localBookie struct {
	core LocalBookie
	adds chan func()
	quit chan struct{} // closed (under the transport's mu) to stop run
}

// addQueue bounds the adds waiting for a bookie's add goroutine.
const addQueue = 1024

func newLocalBookie(core LocalBookie) *localBookie {
	b := &localBookie{core: core, adds: make(chan func(), addQueue), quit: make(chan struct{})}
	go b.run()
	return b
}

// run handles queued adds until quit, then those queued before it.
func (b *localBookie) run() {
	for {
		select {
		case task := <-b.adds:
			task()
		case <-b.quit:
			for {
				select {
				case task := <-b.adds:
					task()
				default:
					return
				}
			}
		}
	}
}

// stop ends run once the adds queued so far are handled. Caller holds the
// transport's mu for writing, so no Send queues after it.
func (b *localBookie) stop() { close(b.quit) }

// queue hands task to run unless the queue is full. Caller holds the
// transport's mu for reading.
func (b *localBookie) queue(task func()) bool {
	select {
	case b.adds <- task:
		return true
	default:
		return false
	}
}

// NewLocalTransport returns a transport with no bookies.
func NewLocalTransport() *LocalTransport {
	return &LocalTransport{cores: map[string]*localBookie{}, workers: gopool.New(500 * time.Millisecond)}
}

// RecordStages times the adds' wait for their bookie's add goroutine
// from now on (stage.BookieQueue); nil stops it.
func (t *LocalTransport) RecordStages(r *stage.Recorder) {
	t.mu.Lock()
	t.stages = r
	t.mu.Unlock()
}

// Add makes a bookie reachable under id (a nil interface removes it). A removed or
// replaced bookie's answers to requests it is still handling are lost, as
// a closed connection's would be: the callers get ErrDisconnected. So
// tests crash a bookie by removing it first: no acknowledgement leaves it
// after that, and a crash image taken then holds everything it answered.
func (t *LocalTransport) Add(id string, core LocalBookie) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.cores[id]; old != nil {
		old.stop()
		delete(t.cores, id)
	}
	if core != nil {
		b := newLocalBookie(core)
		if t.closed {
			b.stop() // adds after Close go to pooled goroutines: nothing will feed it
		}
		t.cores[id] = b
	}
}

// Close ends the transport's idle request goroutines now; requests under
// way finish. Sends after Close still run, each on a goroutine of its own.
func (t *LocalTransport) Close() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		for _, b := range t.cores {
			b.stop()
		}
	}
	t.mu.Unlock()
	t.workers.Close()
}

// Send implements Transport. Handle may wait for the journal or storage,
// so it never runs on the caller's goroutine: adds on the bookie's add
// goroutine (localBookie), other requests on a pooled one.
func (t *LocalTransport) Send(id string, req *bkproto.Request, cb client.Callback) {
	r := *req
	t.mu.RLock()
	b := t.cores[id]
	st := t.stages
	var sent time.Time // timed adds only; one closure either way
	if st != nil && r.Op == bkproto.OpAdd {
		sent = time.Now()
	}
	task := func() {
		if !sent.IsZero() {
			st.Since(stage.BookieQueue, sent)
		}
		t.handle(id, b, &r, cb)
	}
	queued := b != nil && !t.closed && r.Op == bkproto.OpAdd && b.queue(task)
	t.mu.RUnlock()
	if !queued {
		t.workers.Go(task)
	}
}

// handle runs one request on b (nil: the bookie is not in this process).
func (t *LocalTransport) handle(id string, b *localBookie, r *bkproto.Request, cb client.Callback) {
	if b == nil {
		cb(nil, fmt.Errorf("%w: bookie %s is not in this process", client.ErrDisconnected, id))
		return
	}
	b.core.Handle(r, func(resp *bkproto.Response) {
		// Checked after the bookie made the answer true (an add is
		// answered after its journal sync): a removal that comes later
		// comes after that.
		t.mu.RLock()
		cur := t.cores[id]
		t.mu.RUnlock()
		live := cur != nil && cur.core == b.core
		if !live {
			cb(nil, fmt.Errorf("%w: bookie %s left this process before answering", client.ErrDisconnected, id))
			return
		}
		cb(resp, client.StatusError(resp.Status))
	})
}
