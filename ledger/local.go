package ledger

import (
	"fmt"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/internal/gopool"
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
	cores map[string]LocalBookie
	// Requests run on reused goroutines: a fresh one per add grew its
	// stack through the entry log's write cache every time.
	workers *gopool.Pool
}

// NewLocalTransport returns a transport with no bookies.
func NewLocalTransport() *LocalTransport {
	return &LocalTransport{cores: map[string]LocalBookie{}, workers: gopool.New(500 * time.Millisecond)}
}

// Add makes a bookie reachable under id (a nil interface removes it). A removed or
// replaced bookie's answers to requests it is still handling are lost, as
// a closed connection's would be: the callers get ErrDisconnected. So
// tests crash a bookie by removing it first: no acknowledgement leaves it
// after that, and a crash image taken then holds everything it answered.
func (t *LocalTransport) Add(id string, core LocalBookie) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if core == nil {
		delete(t.cores, id)
		return
	}
	t.cores[id] = core
}

// Close ends the transport's idle request goroutines now; requests under
// way finish. Sends after Close still run, each on a goroutine of its own.
func (t *LocalTransport) Close() { t.workers.Close() }

// Send implements Transport. Handle may wait for the journal or storage,
// so it runs on a goroutine of its own (a pooled one).
func (t *LocalTransport) Send(id string, req *bkproto.Request, cb client.Callback) {
	t.mu.RLock()
	core := t.cores[id]
	t.mu.RUnlock()
	r := *req
	t.workers.Go(func() {
		if core == nil {
			cb(nil, fmt.Errorf("%w: bookie %s is not in this process", client.ErrDisconnected, id))
			return
		}
		core.Handle(&r, func(resp *bkproto.Response) {
			// Checked after the bookie made the answer true (an add is
			// answered after its journal sync): a removal that comes later
			// comes after that.
			t.mu.RLock()
			live := t.cores[id] == core
			t.mu.RUnlock()
			if !live {
				cb(nil, fmt.Errorf("%w: bookie %s left this process before answering", client.ErrDisconnected, id))
				return
			}
			cb(resp, client.StatusError(resp.Status))
		})
	})
}
