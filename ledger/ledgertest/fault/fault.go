// Package fault is a ledger Transport for tests that makes bookies fail:
// Transport wraps another transport (a ledger.LocalTransport, the ledger
// package's test cluster, a NetTransport) and, per bookie and per
// operation, fails, refuses, drops, delays, alters or swallows requests,
// while logging and counting every request it is given.
//
// It imports no ledger code (it states the one method it needs as Sender),
// so the ledger package's own tests can use it as well as the managed
// ledger's and the broker's.
//
// # Rules
//
//   - A Fault selects requests by bookie (empty: every bookie), by op (0:
//     every op) and by an optional Match function. The first injected
//     fault that selects a request decides its fate; requests no fault
//     selects go to the wrapped transport unchanged.
//   - A fault with Times > 0 applies to that many requests and is then
//     spent (it stays listed, with its hits, until removed).
//   - At most MaxFaults faults are injected at once; the request log
//     keeps the first MaxLogged requests since the last Reset (Count goes
//     on counting after it is full).
//   - Match runs under the transport's lock: it must not call the
//     Transport. Callbacks and Alter run without it.
//   - Failed and refused requests are answered on a new goroutine, never
//     inside Send, as a real transport's would be.
package fault

import (
	"fmt"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Sender is the transport a Transport wraps: ledger.Transport's method.
type Sender interface {
	Send(bookieID string, req *bkproto.Request, cb client.Callback)
}

// Action is what a Fault does to the requests it selects.
type Action int

const (
	// Fail answers without delivering: Fault.Err, or, when nil,
	// client.ErrDisconnected (an unreachable bookie, a broken connection).
	Fail Action = iota + 1
	// Refuse answers without delivering, as a bookie answering
	// Fault.Status would: a response carrying it and client.StatusError.
	Refuse
	// Drop delivers the request (the bookie applies it) and loses its
	// answer: the caller gets client.ErrDisconnected.
	Drop
	// Delay delivers the request after Fault.Delay.
	Delay
	// Alter delivers the request and calls Fault.Alter on a successful
	// answer before the caller sees it.
	Alter
	// Hang neither delivers nor answers (a bookie that went silent). It
	// breaks Transport's answer-once rule on purpose: only for code that
	// must give up on an answer by itself.
	Hang
)

// Bounds of a Transport.
const (
	MaxFaults = 64
	MaxLogged = 1 << 16
)

// Fault is one injected failure.
type Fault struct {
	Bookie string     // the bookie whose requests it selects; "" for every bookie
	Op     bkproto.Op // the operation it selects; 0 for every operation
	// Match, if set, further selects among the requests Bookie and Op
	// select (it sees only those).
	Match  func(bookie string, req *bkproto.Request) bool
	Action Action
	Err    error          // Fail: the error answered (nil: client.ErrDisconnected)
	Status bkproto.Status // Refuse: the status answered
	Delay  time.Duration  // Delay: how long before delivery
	// Alter (Action Alter) may change a successful answer; req is a copy
	// of the request sent.
	Alter func(bookie string, req *bkproto.Request, resp *bkproto.Response)
	Times int // how many requests it applies to; 0 for no limit
}

// Request is a logged request.
type Request struct {
	Bookie   string
	Op       bkproto.Op
	LedgerID int64
	EntryID  int64
	Flags    uint16
	MaxCount uint32 // OpBatchRead
	Size     int    // bytes of data (OpAdd)
}

// Transport wraps a Sender with injected faults. It is safe for
// concurrent use.
type Transport struct {
	next Sender

	mu struct {
		sync.Mutex
		faults []*injected // in injection order
		lastID int
		log    []Request   // at most MaxLogged
		counts map[key]int // requests per bookie and op since Reset
	}
}

type injected struct {
	id   int
	f    Fault
	hits int
}

type key struct {
	bookie string
	op     bkproto.Op
}

// NewTransport returns a Transport delivering to next, with no faults.
func NewTransport(next Sender) *Transport {
	t := &Transport{next: next}
	t.mu.counts = map[key]int{}
	return t
}

// Inject adds f after the faults already injected and returns its id. It
// panics on a fault without a valid action or its argument, or when
// MaxFaults are injected (a test bug).
func (t *Transport) Inject(f Fault) int {
	switch {
	case f.Action < Fail || f.Action > Hang:
		panic(fmt.Sprintf("fault: unknown action %d", f.Action))
	case f.Action == Refuse && f.Status == bkproto.StatusOK:
		panic("fault: Refuse needs a Status other than StatusOK")
	case f.Action == Delay && f.Delay <= 0:
		panic("fault: Delay needs a positive Delay")
	case f.Action == Alter && f.Alter == nil:
		panic("fault: Alter needs an Alter function")
	case f.Times < 0:
		panic("fault: negative Times")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.faults) >= MaxFaults {
		panic(fmt.Sprintf("fault: more than %d faults injected", MaxFaults))
	}
	t.mu.lastID++
	t.mu.faults = append(t.mu.faults, &injected{id: t.mu.lastID, f: f})
	return t.mu.lastID
}

// Remove removes the fault id (no-op if it is not injected). Requests it
// already selected keep their fate.
func (t *Transport) Remove(id int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, in := range t.mu.faults {
		if in.id == id {
			t.mu.faults = append(t.mu.faults[:i], t.mu.faults[i+1:]...)
			return
		}
	}
}

// Clear removes every fault.
func (t *Transport) Clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.faults = nil
}

// Hits returns how many requests the fault id has selected (0 once it is
// removed).
func (t *Transport) Hits(id int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.mu.faults {
		if in.id == id {
			return in.hits
		}
	}
	return 0
}

// Requests returns the logged requests to bookie ("" for any) with op (0
// for any), in the order Send was called.
func (t *Transport) Requests(bookie string, op bkproto.Op) []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Request
	for _, r := range t.mu.log {
		if (bookie == "" || r.Bookie == bookie) && (op == 0 || r.Op == op) {
			out = append(out, r)
		}
	}
	return out
}

// Count returns how many requests to bookie ("" for any) with op (0 for
// any) were sent since the last Reset, logged or not.
func (t *Transport) Count(bookie string, op bkproto.Op) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, c := range t.mu.counts {
		if (bookie == "" || k.bookie == bookie) && (op == 0 || k.op == op) {
			n += c
		}
	}
	return n
}

// Reset empties the request log and the counts; faults stay.
func (t *Transport) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.log = nil
	t.mu.counts = map[key]int{}
}

// Send implements ledger.Transport.
func (t *Transport) Send(bookieID string, req *bkproto.Request, cb client.Callback) {
	f, ok := t.decide(bookieID, req)
	if !ok {
		t.next.Send(bookieID, req, cb)
		return
	}
	r := *req // a copy for Delay and Alter: the caller's request is its own
	switch f.Action {
	case Fail:
		err := f.Err
		if err == nil {
			err = fmt.Errorf("%w: fault: bookie %s unreachable", client.ErrDisconnected, bookieID)
		}
		go cb(nil, err)
	case Refuse:
		resp := &bkproto.Response{Op: req.Op, Status: f.Status, RequestID: req.RequestID, LedgerID: req.LedgerID, EntryID: req.EntryID}
		go cb(resp, client.StatusError(f.Status))
	case Drop:
		t.next.Send(bookieID, req, func(*bkproto.Response, error) {
			cb(nil, fmt.Errorf("%w: fault: answer from bookie %s lost", client.ErrDisconnected, bookieID))
		})
	case Delay:
		time.AfterFunc(f.Delay, func() { t.next.Send(bookieID, &r, cb) })
	case Alter:
		t.next.Send(bookieID, req, func(resp *bkproto.Response, err error) {
			if err == nil && resp != nil {
				f.Alter(bookieID, &r, resp)
			}
			cb(resp, err)
		})
	case Hang:
	}
}

// decide logs req and returns the fault that selects it, if any.
func (t *Transport) decide(bookieID string, req *bkproto.Request) (Fault, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.counts[key{bookieID, req.Op}]++
	if len(t.mu.log) < MaxLogged {
		t.mu.log = append(t.mu.log, Request{Bookie: bookieID, Op: req.Op, LedgerID: req.LedgerID, EntryID: req.EntryID,
			Flags: req.Flags, MaxCount: req.MaxCount, Size: len(req.Data)})
	}
	for _, in := range t.mu.faults {
		f := in.f
		if f.Times > 0 && in.hits >= f.Times {
			continue // spent
		}
		if (f.Bookie != "" && f.Bookie != bookieID) || (f.Op != 0 && f.Op != req.Op) {
			continue
		}
		if f.Match != nil && !f.Match(bookieID, req) {
			continue
		}
		in.hits++
		return f, true
	}
	return Fault{}, false
}
