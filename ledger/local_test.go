package ledger

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// gateBookie answers every request it handles with StatusOK, after gate
// opens; it records the adds' entry ids in the order handled, and which
// goroutines ran them (by how many ran at once).
type gateBookie struct {
	gate     chan struct{}
	mu       sync.Mutex
	order    []int64
	inHandle int
	maxRun   int
}

func (b *gateBookie) running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inHandle
}

func (b *gateBookie) Handle(r *bkproto.Request, reply func(*bkproto.Response)) {
	b.mu.Lock()
	b.inHandle++
	b.maxRun = max(b.maxRun, b.inHandle)
	b.mu.Unlock()
	<-b.gate
	b.mu.Lock()
	b.inHandle--
	if r.Op == bkproto.OpAdd {
		b.order = append(b.order, r.EntryID)
	}
	b.mu.Unlock()
	reply(&bkproto.Response{Op: r.Op, RequestID: r.RequestID, Status: bkproto.StatusOK})
}

// answers counts callbacks and the errors among them.
type answers struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (a *answers) cb() client.Callback {
	a.wg.Add(1)
	var once sync.Once
	return func(_ *bkproto.Response, err error) {
		once.Do(func() {
			a.mu.Lock()
			a.errs = append(a.errs, err)
			a.mu.Unlock()
			a.wg.Done()
		})
	}
}

func (a *answers) wait(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("requests left unanswered")
	}
}

// sendWithin sends and fails the test if Send blocks.
func sendWithin(t *testing.T, tr *LocalTransport, id string, req *bkproto.Request, cb client.Callback) {
	t.Helper()
	sent := make(chan struct{})
	go func() { tr.Send(id, req, cb); close(sent) }()
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatalf("Send of %v entry %d blocked", req.Op, req.EntryID)
	}
}

// sendAddsThenRead sends n adds (entries 0 to n-1 of ledger 1) to bookie
// id, then a read of entry 0, and returns their answers.
func sendAddsThenRead(t *testing.T, tr *LocalTransport, id string, n int64) (adds, read *answers) {
	t.Helper()
	adds, read = &answers{}, &answers{}
	for e := range n {
		sendWithin(t, tr, id, &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: e}, adds.cb())
	}
	sendWithin(t, tr, id, &bkproto.Request{Op: bkproto.OpRead, LedgerID: 1, EntryID: 0}, read.cb())
	return adds, read
}

// Adds run one at a time on the bookie's add goroutine, in the order sent;
// other requests do not wait behind them.
func TestLocalAddsRunInOrderOnOneGoroutine(t *testing.T) {
	b := &gateBookie{gate: make(chan struct{})}
	tr := NewLocalTransport()
	defer tr.Close()
	tr.Add("b", b)
	a, read := sendAddsThenRead(t, tr, "b", 200)
	// The read runs beside the add that holds the add goroutine.
	deadline := time.Now().Add(5 * time.Second)
	for {
		run := b.running()
		if run == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests running, want the first add and the read", run)
		}
		time.Sleep(time.Millisecond)
	}
	close(b.gate)
	a.wait(t)
	read.wait(t)
	if b.maxRun != 2 {
		t.Fatalf("at most %d requests ran at once, want 2 (one add, one read)", b.maxRun)
	}
	for i, e := range b.order {
		if e != int64(i) {
			t.Fatalf("adds handled in order %v, want the order sent", b.order)
		}
	}
	for _, err := range a.errs {
		if err != nil {
			t.Fatalf("add answered %v", err)
		}
	}
}

// A full add queue never blocks Send: the adds past it run on goroutines
// of their own, and every add is answered.
func TestLocalAddsPastAFullQueueRunAside(t *testing.T) {
	b := &gateBookie{gate: make(chan struct{})}
	tr := NewLocalTransport()
	defer tr.Close()
	tr.Add("b", b)
	var a answers
	n := addQueue + 50
	for e := range int64(n) {
		sendWithin(t, tr, "b", &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: e}, a.cb())
	}
	// Every add waits at the gate, so the ones run aside and the add
	// goroutine's first meet there; checked before the gate opens (after
	// it, the adds may run one after another: CI of 7 Dec failed so).
	for deadline := time.Now().Add(10 * time.Second); b.running() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no add ran beside the add goroutine although its queue was full")
		}
	}
	close(b.gate)
	a.wait(t)
	if len(b.order) != n {
		t.Fatalf("%d adds handled, want %d", len(b.order), n)
	}
}

// Adds queued when their bookie leaves the process are still handled, and
// answered ErrDisconnected; adds after Close still run.
func TestLocalAddsQueuedWhenTheBookieLeaves(t *testing.T) {
	b := &gateBookie{gate: make(chan struct{})}
	tr := NewLocalTransport()
	tr.Add("b", b)
	var a answers
	for e := range int64(10) {
		sendWithin(t, tr, "b", &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: e}, a.cb())
	}
	tr.Add("b", nil)
	close(b.gate)
	a.wait(t)
	for _, err := range a.errs {
		if !errors.Is(err, client.ErrDisconnected) {
			t.Fatalf("an add queued before its bookie left answered %v, want ErrDisconnected", err)
		}
	}
	if len(b.order) != 10 {
		t.Fatalf("%d of 10 queued adds handled", len(b.order))
	}

	b2 := &gateBookie{gate: make(chan struct{})}
	close(b2.gate)
	tr.Add("b", b2)
	tr.Close()
	var after answers
	sendWithin(t, tr, "b", &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1, EntryID: 0}, after.cb())
	after.wait(t)
	if after.errs[0] != nil || len(b2.order) != 1 {
		t.Fatalf("an add after Close answered %v, %d handled", after.errs[0], len(b2.order))
	}
}
