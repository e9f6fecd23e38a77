package bookie

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// maxLongPoll bounds how long a long-poll read may wait, whatever the
// client asks: a waiter holds a timer and its request.
const maxLongPoll = 5 * time.Minute

// lacTracker holds the highest last-add-confirmed this bookie has seen per
// ledger (piggybacked on adds, or written explicitly) and the long-poll
// reads waiting for it to move.
type lacTracker struct {
	mu struct {
		sync.Mutex
		ledgers map[int64]*lacState
		closed  bool
	}
}

type lacState struct {
	lac     int64
	waiters map[*lacWaiter]struct{}
}

type lacWaiter struct {
	once  sync.Once
	timer *time.Timer // guarded by lacTracker.mu
	fire  func(status bkproto.Status)
}

func (t *lacTracker) init() { t.mu.ledgers = make(map[int64]*lacState) }

// stateLocked returns the ledger's state, creating it with lac.
func (t *lacTracker) stateLocked(ledgerID, lac int64) *lacState {
	st := t.mu.ledgers[ledgerID]
	if st == nil {
		st = &lacState{lac: lac}
		t.mu.ledgers[ledgerID] = st
	}
	return st
}

// advance raises the ledger's LAC and wakes the long polls it passes.
func (t *lacTracker) advance(ledgerID, lac int64, c *Core) {
	t.mu.Lock()
	st := t.mu.ledgers[ledgerID]
	if st == nil {
		t.mu.Unlock()
		// Not tracked yet: start from storage so the value never goes back.
		base := c.storedLAC(ledgerID)
		t.mu.Lock()
		st = t.stateLocked(ledgerID, base)
	}
	var woken []*lacWaiter
	if lac > st.lac {
		st.lac = lac
		for w := range st.waiters {
			woken = append(woken, w)
		}
		clear(st.waiters)
	}
	t.mu.Unlock()
	for _, w := range woken {
		go w.fire(bkproto.StatusOK)
	}
}

// wakeAll answers every long poll of a ledger (it was fenced).
func (t *lacTracker) wakeAll(ledgerID int64, _ *Core) {
	t.mu.Lock()
	var woken []*lacWaiter
	if st := t.mu.ledgers[ledgerID]; st != nil {
		for w := range st.waiters {
			woken = append(woken, w)
		}
		clear(st.waiters)
	}
	t.mu.Unlock()
	for _, w := range woken {
		go w.fire(bkproto.StatusOK)
	}
}

// forget drops a deleted ledger, answering its long polls.
func (t *lacTracker) forget(ledgerID int64) {
	t.mu.Lock()
	st := t.mu.ledgers[ledgerID]
	delete(t.mu.ledgers, ledgerID)
	t.mu.Unlock()
	if st != nil {
		for w := range st.waiters {
			go w.fire(bkproto.StatusNoLedger)
		}
	}
}

// closeAll answers every long poll: the bookie is shutting down.
func (t *lacTracker) closeAll() {
	t.mu.Lock()
	t.mu.closed = true
	var woken []*lacWaiter
	for _, st := range t.mu.ledgers {
		for w := range st.waiters {
			woken = append(woken, w)
		}
		clear(st.waiters)
	}
	t.mu.Unlock()
	for _, w := range woken {
		w.fire(bkproto.StatusShuttingDown)
	}
}

// lacOf returns the highest LAC known for the ledger.
func (c *Core) lacOf(ledgerID int64) int64 {
	c.lacs.mu.Lock()
	if st := c.lacs.mu.ledgers[ledgerID]; st != nil {
		lac := st.lac
		c.lacs.mu.Unlock()
		return lac
	}
	c.lacs.mu.Unlock()
	base := c.storedLAC(ledgerID) // storage calls outside lacs.mu
	c.lacs.mu.Lock()
	defer c.lacs.mu.Unlock()
	st := c.lacs.stateLocked(ledgerID, base)
	st.lac = max(st.lac, base)
	return st.lac
}

// storedLAC derives a ledger's LAC from storage: the explicit LAC and the
// LAC piggybacked on its last entry. -1 when neither exists.
func (c *Core) storedLAC(ledgerID int64) int64 {
	lac := int64(-1)
	if explicit, err := c.storage.ExplicitLAC(ledgerID); err == nil && len(explicit) >= 8 {
		lac = int64(binary.BigEndian.Uint64(explicit))
	}
	last, err := c.storage.LastEntryID(ledgerID)
	if err != nil {
		return lac
	}
	data, err := c.storage.ReadEntry(ledgerID, last)
	if err != nil {
		return lac
	}
	if h, err := bkproto.ParseEntryHead(data); err == nil && h.LAC > lac {
		lac = h.LAC
	}
	return lac
}

// noteEntryLAC raises a tracked LAC from a replayed entry.
func (c *Core) noteEntryLAC(ledgerID int64, data []byte) {
	h, err := bkproto.ParseEntryHead(data)
	if err != nil {
		return
	}
	c.lacs.mu.Lock()
	defer c.lacs.mu.Unlock()
	if st := c.lacs.mu.ledgers[ledgerID]; st != nil && h.LAC > st.lac {
		st.lac = h.LAC
	}
}

// longPoll answers once the ledger's LAC passes r.PreviousLAC, or when the
// timeout ends (with the unchanged LAC and no entry).
func (c *Core) longPoll(r *bkproto.Request, resp *bkproto.Response, reply Reply) {
	// A ledger unknown here may simply not have its first entry yet: the
	// poll waits for it like for any other LAC change.
	answer := func(status bkproto.Status) {
		resp.Status = status
		if status != bkproto.StatusOK {
			reply(resp)
			return
		}
		resp.LAC = c.lacOf(r.LedgerID)
		if r.EntryID <= resp.LAC {
			data, err := c.storage.ReadEntry(r.LedgerID, r.EntryID)
			if err == nil {
				resp.Data = data
			} else if !errors.Is(err, entrylog.ErrNoEntry) {
				resp.Status = statusOf(err)
			}
		}
		reply(resp)
	}
	if c.lacOf(r.LedgerID) > r.PreviousLAC {
		answer(bkproto.StatusOK)
		return
	}
	w := &lacWaiter{}
	w.fire = func(status bkproto.Status) {
		w.once.Do(func() {
			c.lacs.mu.Lock()
			timer := w.timer // set under lacs.mu, maybe after a wake-up
			c.lacs.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			answer(status)
		})
	}
	if !c.lacs.wait(r.LedgerID, r.PreviousLAC, w) {
		w.fire(bkproto.StatusOK)
		return
	}
	timeout := min(time.Duration(r.TimeoutMillis)*time.Millisecond, maxLongPoll)
	c.lacs.mu.Lock()
	w.timer = time.AfterFunc(timeout, func() { c.lacs.drop(r.LedgerID, w); w.fire(bkproto.StatusOK) })
	c.lacs.mu.Unlock()
}

// wait registers w unless the LAC already passed previous (false) or the
// tracker is closed (false).
func (t *lacTracker) wait(ledgerID, previous int64, w *lacWaiter) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.mu.ledgers[ledgerID]
	if t.mu.closed || st == nil || st.lac > previous {
		return false
	}
	if st.waiters == nil {
		st.waiters = make(map[*lacWaiter]struct{})
	}
	st.waiters[w] = struct{}{}
	return true
}

func (t *lacTracker) drop(ledgerID int64, w *lacWaiter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.mu.ledgers[ledgerID]; st != nil {
		delete(st.waiters, w)
	}
}
