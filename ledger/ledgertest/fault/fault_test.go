package fault_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

var _ ledger.Transport = (*fault.Transport)(nil)

// echo answers every request StatusOK at once and counts deliveries.
type echo struct{ delivered atomic.Int32 }

func (e *echo) Send(_ string, req *bkproto.Request, cb client.Callback) {
	e.delivered.Add(1)
	go cb(&bkproto.Response{Op: req.Op, RequestID: req.RequestID, LedgerID: req.LedgerID, EntryID: req.EntryID}, nil)
}

type answer struct {
	resp *bkproto.Response
	err  error
}

// send sends one request and waits up to wait for its answer (ok false
// when none came).
func send(tr *fault.Transport, b string, op bkproto.Op, entry int64, wait time.Duration) (answer, bool) {
	ch := make(chan answer, 1)
	tr.Send(b, &bkproto.Request{Op: op, LedgerID: 1, EntryID: entry}, func(r *bkproto.Response, err error) { ch <- answer{r, err} })
	select {
	case a := <-ch:
		return a, true
	case <-time.After(wait):
		return answer{}, false
	}
}

func TestActions(t *testing.T) {
	next := &echo{}
	tr := fault.NewTransport(next)
	boom := errors.New("boom")
	fail := tr.Inject(fault.Fault{Bookie: "b1", Op: bkproto.OpAdd, Action: fault.Fail})
	tr.Inject(fault.Fault{Bookie: "b1", Op: bkproto.OpRead, Action: fault.Fail, Err: boom})
	tr.Inject(fault.Fault{Bookie: "b2", Op: bkproto.OpAdd, Action: fault.Refuse, Status: bkproto.StatusReadOnly})
	tr.Inject(fault.Fault{Bookie: "b2", Op: bkproto.OpRead, Action: fault.Drop})
	tr.Inject(fault.Fault{Bookie: "b3", Action: fault.Alter, Alter: func(_ string, req *bkproto.Request, resp *bkproto.Response) {
		resp.LAC = req.EntryID + 100
	}})
	tr.Inject(fault.Fault{Bookie: "b4", Action: fault.Hang})

	if a, ok := send(tr, "b1", bkproto.OpAdd, 0, time.Second); !ok || !errors.Is(a.err, client.ErrDisconnected) {
		t.Fatalf("failed add: %+v %v", a, ok)
	}
	if a, ok := send(tr, "b1", bkproto.OpRead, 0, time.Second); !ok || !errors.Is(a.err, boom) {
		t.Fatalf("failed read: %+v %v", a, ok)
	}
	if a, ok := send(tr, "b2", bkproto.OpAdd, 0, time.Second); !ok || !errors.Is(a.err, client.ErrReadOnly) ||
		a.resp == nil || a.resp.Status != bkproto.StatusReadOnly {
		t.Fatalf("refused add: %+v %v", a, ok)
	}
	if next.delivered.Load() != 0 {
		t.Fatalf("%d failed or refused requests were delivered", next.delivered.Load())
	}
	if a, ok := send(tr, "b2", bkproto.OpRead, 0, time.Second); !ok || !errors.Is(a.err, client.ErrDisconnected) || next.delivered.Load() != 1 {
		t.Fatalf("dropped read: %+v %v, %d delivered", a, ok, next.delivered.Load())
	}
	if a, ok := send(tr, "b3", bkproto.OpRead, 7, time.Second); !ok || a.err != nil || a.resp.LAC != 107 {
		t.Fatalf("altered read: %+v %v", a, ok)
	}
	if _, ok := send(tr, "b4", bkproto.OpRead, 0, 50*time.Millisecond); ok {
		t.Fatal("a hung request was answered")
	}
	if a, ok := send(tr, "b5", bkproto.OpAdd, 0, time.Second); !ok || a.err != nil {
		t.Fatalf("request no fault selects: %+v %v", a, ok)
	}
	if n := tr.Hits(fail); n != 1 {
		t.Fatalf("hits %d, want 1", n)
	}
	tr.Remove(fail)
	if a, ok := send(tr, "b1", bkproto.OpAdd, 0, time.Second); !ok || a.err != nil || tr.Hits(fail) != 0 {
		t.Fatalf("add after the fault was removed: %+v %v", a, ok)
	}
}

func TestDelayTimesMatchAndOrder(t *testing.T) {
	tr := fault.NewTransport(&echo{})
	d := tr.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: 100 * time.Millisecond, Times: 1})
	start := time.Now()
	if a, ok := send(tr, "b1", bkproto.OpAdd, 0, 5*time.Second); !ok || a.err != nil || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("delayed add: %+v %v after %v", a, ok, time.Since(start))
	}
	start = time.Now()
	if _, ok := send(tr, "b1", bkproto.OpAdd, 1, 5*time.Second); !ok || time.Since(start) >= 100*time.Millisecond || tr.Hits(d) != 1 {
		t.Fatalf("a spent fault still delayed (hits %d)", tr.Hits(d))
	}
	// Match narrows; the first fault that selects a request decides.
	tr.Clear()
	tr.Inject(fault.Fault{Match: func(_ string, r *bkproto.Request) bool { return r.EntryID == 5 }, Action: fault.Refuse, Status: bkproto.StatusFenced})
	tr.Inject(fault.Fault{Action: fault.Fail})
	if a, _ := send(tr, "b1", bkproto.OpAdd, 5, time.Second); !errors.Is(a.err, client.ErrFenced) {
		t.Fatalf("entry 5: %v, want fenced", a.err)
	}
	if a, _ := send(tr, "b1", bkproto.OpAdd, 6, time.Second); !errors.Is(a.err, client.ErrDisconnected) {
		t.Fatalf("entry 6: %v, want disconnected", a.err)
	}
}

func TestLogAndCounts(t *testing.T) {
	tr := fault.NewTransport(&echo{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range 100 {
				b, op := "b1", bkproto.OpAdd
				if i%2 == 1 {
					b, op = "b2", bkproto.OpRead
				}
				send(tr, b, op, int64(e), time.Second)
			}
		}()
	}
	wg.Wait()
	if n, m, all := tr.Count("b1", bkproto.OpAdd), tr.Count("", bkproto.OpRead), tr.Count("", 0); n != 400 || m != 400 || all != 800 {
		t.Fatalf("counts %d %d %d, want 400 400 800", n, m, all)
	}
	if got := tr.Requests("b2", bkproto.OpRead); len(got) != 400 || got[0].Bookie != "b2" || got[0].Op != bkproto.OpRead {
		t.Fatalf("logged reads: %d", len(got))
	}
	tr.Reset()
	if tr.Count("", 0) != 0 || len(tr.Requests("", 0)) != 0 {
		t.Fatal("Reset left requests")
	}
	// The log is bounded; counting goes on.
	for e := range fault.MaxLogged + 10 {
		tr.Send("b1", &bkproto.Request{Op: bkproto.OpInfo, EntryID: int64(e)}, func(*bkproto.Response, error) {})
	}
	if n, c := len(tr.Requests("", 0)), tr.Count("b1", bkproto.OpInfo); n != fault.MaxLogged || c != fault.MaxLogged+10 {
		t.Fatalf("logged %d, counted %d", n, c)
	}
}

func TestInjectBounds(t *testing.T) {
	tr := fault.NewTransport(&echo{})
	mustPanic := func(name string, f fault.Fault) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		tr.Inject(f)
	}
	mustPanic("no action", fault.Fault{})
	mustPanic("refuse OK", fault.Fault{Action: fault.Refuse})
	mustPanic("no delay", fault.Fault{Action: fault.Delay})
	mustPanic("no alter", fault.Fault{Action: fault.Alter})
	for range fault.MaxFaults {
		tr.Inject(fault.Fault{Action: fault.Fail})
	}
	mustPanic("too many", fault.Fault{Action: fault.Fail})
}
