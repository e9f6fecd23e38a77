package bookie

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// Reply answers one request; it is called exactly once. Slices in the
// response stay valid after the call returns. It is an alias, so Handle's
// signature is spelled without naming this package: ledger.LocalBookie
// states it that way and *Core satisfies it.
type Reply = func(*bkproto.Response)

// Handle serves one request. Slices in r must stay valid until reply is
// called (the server copies add data out of the inbound buffer). It may
// block on storage or the journal: call it from a worker, not a loop.
func (c *Core) Handle(r *bkproto.Request, reply Reply) {
	resp := &bkproto.Response{Op: r.Op, RequestID: r.RequestID, LedgerID: r.LedgerID, EntryID: r.EntryID}
	answer := func(s bkproto.Status) {
		resp.Status = s
		reply(resp)
	}
	if c.shuttingDown.Load() {
		answer(bkproto.StatusShuttingDown)
		return
	}
	switch r.Op {
	case bkproto.OpAdd:
		if st := c.opts.Stages; st != nil {
			start, inner := time.Now(), answer
			answer = func(s bkproto.Status) { st.Since(stage.BookieAdd, start); inner(s) }
		}
		c.add(r, answer)
	case bkproto.OpRead:
		c.read(r, resp, reply)
	case bkproto.OpReadLAC:
		c.readLAC(r, resp, reply)
	case bkproto.OpWriteLAC:
		c.writeLAC(r, answer)
	case bkproto.OpForceLedger:
		c.forceLedger(r, answer)
	case bkproto.OpBatchRead:
		c.batchRead(r, resp, reply)
	case bkproto.OpInfo:
		c.info(r, reply)
	default:
		answer(bkproto.StatusBadRequest)
	}
}

// statusOf maps a storage or journal error to a response status.
func statusOf(err error) bkproto.Status {
	switch {
	case err == nil:
		return bkproto.StatusOK
	case errors.Is(err, entrylog.ErrNoLedger):
		return bkproto.StatusNoLedger
	case errors.Is(err, entrylog.ErrNoEntry):
		return bkproto.StatusNoEntry
	case errors.Is(err, engine.ErrCorruption):
		return bkproto.StatusCorrupt
	case errors.Is(err, entrylog.ErrClosed), errors.Is(err, journal.ErrClosed):
		return bkproto.StatusShuttingDown
	case errors.Is(err, entrylog.ErrEntryTooLarge), errors.Is(err, journal.ErrEntryTooLarge):
		return bkproto.StatusTooLarge // this entry only: the bookie is fine
	case isNoSpace(err):
		// As BookKeeper answers an add to a bookie whose disks are full
		// (EREADONLY): the client replaces this bookie in the ensemble.
		return bkproto.StatusReadOnly
	}
	return bkproto.StatusIOError
}

// ledgerLocked returns the cached state of a ledger, loading it from
// storage; nil if the ledger has no state. The stripe lock is held.
func (c *Core) ledgerLocked(ledgerID int64) (*ledgerState, error) {
	m := c.ledgers[c.stripe(ledgerID)]
	if st := m[ledgerID]; st != nil {
		return st, nil
	}
	key, err := c.storage.MasterKey(ledgerID)
	if errors.Is(err, entrylog.ErrNoLedger) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fenced, err := c.storage.IsFenced(ledgerID)
	if err != nil {
		return nil, err
	}
	st := &ledgerState{masterKey: key, fenced: fenced}
	m[ledgerID] = st
	return st, nil
}

// ledgerForWriteLocked returns the ledger's state after checking key,
// creating the state (and journaling the key) for a ledger seen for the
// first time. The stripe lock is held.
func (c *Core) ledgerForWriteLocked(js *journal.Set, ledgerID int64, key []byte) (*ledgerState, bkproto.Status) {
	st, err := c.ledgerLocked(ledgerID)
	if err != nil {
		return nil, statusOf(err)
	}
	if st != nil {
		if st.masterKey != nil && !bytes.Equal(st.masterKey, key) {
			return nil, bkproto.StatusUnauthorized
		}
		return st, bkproto.StatusOK
	}
	if err := c.storage.SetMasterKey(ledgerID, key); err != nil {
		c.noteStorageError(err)
		return nil, statusOf(err)
	}
	// Storage ignores writes to a deleted ledger (so replay cannot revive
	// it); a client still writing to one is told, not silently dropped.
	if ok, err := c.storage.LedgerExists(ledgerID); err != nil || !ok {
		if err != nil {
			return nil, statusOf(err)
		}
		return nil, bkproto.StatusNoLedger
	}
	keyCopy := append([]byte{}, key...)
	if err := c.journalAdd(js, ledgerID, metaMasterKey, keyCopy, func(journal.Mark, error) {}); err != nil {
		return nil, statusOf(err)
	}
	st = &ledgerState{masterKey: keyCopy}
	c.ledgers[c.stripe(ledgerID)][ledgerID] = st
	return st, bkproto.StatusOK
}

func (c *Core) noteStorageError(err error) {
	switch {
	case errors.Is(err, entrylog.ErrFailed):
		c.failStorage(err)
	case isNoSpace(err):
		c.noSpace("ledger storage", err)
	}
}

// noteJournalError turns the bookie read-only once its journal failed
// (for good) or found its disk full (until space is freed). Called before
// the add is answered, so a client told of the failure finds the bookie
// read-only.
func (c *Core) noteJournalError(err error) {
	switch {
	case errors.Is(err, journal.ErrFailed):
		c.failJournal(err)
	case isNoSpace(err):
		c.noSpace("journal", err)
	}
}

// journalAdd adds a journal record whose failure, like an add's, must make
// the bookie read-only (meta records: master key, fence, explicit LAC, force).
func (c *Core) journalAdd(js *journal.Set, ledgerID, entryID int64, payload []byte, cb journal.Callback) error {
	err := js.Add(ledgerID, entryID, payload, func(m journal.Mark, err error) {
		c.noteJournalError(err)
		cb(m, err)
	})
	c.noteJournalError(err)
	return err
}

func (c *Core) add(r *bkproto.Request, answer func(bkproto.Status)) {
	recovery := r.Flags&bkproto.FlagRecoveryAdd != 0
	if ro, _ := c.ReadOnly(); ro && !recovery {
		answer(bkproto.StatusReadOnly)
		return
	}
	head, err := bkproto.ParseEntryHead(r.Data)
	if err != nil || head.LedgerID != r.LedgerID || head.EntryID != r.EntryID || r.EntryID < 0 {
		answer(bkproto.StatusBadRequest)
		return
	}
	if len(r.Data) > journal.MaxEntrySize {
		// Refused before storage takes it: the bookie stores before it
		// journals, and an entry the journal then refused would be readable.
		answer(bkproto.StatusTooLarge)
		return
	}
	js := c.journal.Load()
	if js == nil {
		answer(bkproto.StatusShuttingDown)
		return
	}
	s := c.stripe(r.LedgerID)
	c.stripes[s].Lock()
	status := c.addLocked(js, r, head, recovery, answer)
	c.stripes[s].Unlock()
	if status != bkproto.StatusOK {
		answer(status)
	}
}

// addLocked checks, stores and journals one add. On StatusOK the answer
// is owned by the journal callback (or was given, for a deferred sync).
func (c *Core) addLocked(js *journal.Set, r *bkproto.Request, head bkproto.EntryHead, recovery bool, answer func(bkproto.Status)) bkproto.Status {
	st, status := c.ledgerForWriteLocked(js, r.LedgerID, r.MasterKey)
	if status != bkproto.StatusOK {
		return status
	}
	if st.fenced && !recovery {
		return bkproto.StatusFenced
	}
	sum := dataSum(r)
	if err := c.storeEntry(r, sum); err != nil {
		c.noteStorageError(err)
		return statusOf(err)
	}
	c.lacs.advance(r.LedgerID, head.LAC, c)
	deferred := r.Flags&bkproto.FlagDeferredSync != 0
	queued := time.Now()
	// Not journalAdd: this closure is the one allocation of the hot path.
	done := func(_ journal.Mark, err error) {
		c.noteJournalError(err)
		c.opts.Metrics.observeJournalAdd(time.Since(queued))
		if !deferred {
			answer(statusOf(err))
		}
	}
	if err := js.AddSummed(r.LedgerID, r.EntryID, r.Data, sum, done); err != nil {
		c.noteJournalError(err)
		return statusOf(err)
	}
	if deferred {
		answer(bkproto.StatusOK)
	}
	return bkproto.StatusOK
}

// dataSum returns the CRC32C of an add's data for the journal and the
// entry log to build their record checksums from, so the data is summed
// once here rather than once by each: the ledger client's sum when it is
// in this process (no wire in between), else computed. Small entries are
// not summed: combining costs more than each store hashing them itself.
func dataSum(r *bkproto.Request) crc32c.Known {
	switch {
	case len(r.Data) < crc32c.CombineWorthFrom:
		return crc32c.Known{}
	case r.DataSum.OK:
		return r.DataSum
	}
	return crc32c.Of(crc32c.Checksum(r.Data))
}

// storeEntry hands an add to ledger storage, with its data's CRC32C when
// there is one and the storage takes it, and the data itself to keep
// when the storage can: an add's data is never changed after it is made
// (LocalBookie's contract; the server copies each frame).
func (c *Core) storeEntry(r *bkproto.Request, sum crc32c.Known) error {
	if a, ok := c.storage.(entrylog.KeepingAdder); ok {
		return a.AddEntryKept(r.LedgerID, r.EntryID, r.Data, sum)
	}
	if a, ok := c.storage.(entrylog.SummedAdder); ok {
		return a.AddEntrySummed(r.LedgerID, r.EntryID, r.Data, sum)
	}
	return c.storage.AddEntry(r.LedgerID, r.EntryID, r.Data)
}

func (c *Core) read(r *bkproto.Request, resp *bkproto.Response, reply Reply) {
	if r.Flags&bkproto.FlagFence != 0 {
		c.fenceThenRead(r, resp, reply)
		return
	}
	if r.Flags&bkproto.FlagLongPoll != 0 {
		c.longPoll(r, resp, reply)
		return
	}
	c.readEntry(r.LedgerID, r.EntryID, resp)
	reply(resp)
}

// readEntry fills resp with an entry and the ledger's LAC; for
// bkproto.EntryLAC, with the ledger's last entry (none is not an error).
func (c *Core) readEntry(ledgerID, entryID int64, resp *bkproto.Response) {
	if entryID == bkproto.EntryLAC {
		c.readLast(ledgerID, resp)
		return
	}
	data, err := c.storage.ReadEntry(ledgerID, entryID)
	resp.Status = statusOf(err)
	if err != nil && resp.Status == bkproto.StatusCorrupt {
		c.log.Error("bookie read found a corrupt entry", "ledger", ledgerID, "entry", entryID, "err", err)
	}
	if err == nil {
		resp.Data = data
		resp.LAC = c.lacOf(ledgerID)
	}
}

// fenceThenRead fences the ledger (durably) and then reads the entry.
func (c *Core) fenceThenRead(r *bkproto.Request, resp *bkproto.Response, reply Reply) {
	js := c.journal.Load()
	if js == nil {
		resp.Status = bkproto.StatusShuttingDown
		reply(resp)
		return
	}
	s := c.stripe(r.LedgerID)
	c.stripes[s].Lock()
	status := c.fenceLocked(js, r, func(err error) {
		if err != nil {
			resp.Status = statusOf(err)
			reply(resp)
			return
		}
		c.readEntry(r.LedgerID, r.EntryID, resp)
		c.lacs.wakeAll(r.LedgerID, c) // long polls end: the writer is gone
		reply(resp)
	})
	c.stripes[s].Unlock()
	if status != bkproto.StatusOK {
		resp.Status = status
		reply(resp)
	}
}

// fenceLocked sets the fenced flag and journals it; then runs once the
// fence record is durable (it is journaled even when the ledger was fenced
// already, so no fencing reader is answered before the fence is durable).
func (c *Core) fenceLocked(js *journal.Set, r *bkproto.Request, then func(error)) bkproto.Status {
	st, status := c.ledgerForWriteLocked(js, r.LedgerID, r.MasterKey)
	if status != bkproto.StatusOK {
		return status
	}
	if _, err := c.storage.SetFenced(r.LedgerID); err != nil {
		c.noteStorageError(err)
		return statusOf(err)
	}
	st.fenced = true
	if err := c.journalAdd(js, r.LedgerID, metaFence, nil, func(_ journal.Mark, err error) { then(err) }); err != nil {
		return statusOf(err)
	}
	return bkproto.StatusOK
}

// readLast fills resp with the ledger's LAC and last entry.
func (c *Core) readLast(ledgerID int64, resp *bkproto.Response) {
	resp.Status = bkproto.StatusOK
	last, err := c.storage.LastEntryID(ledgerID)
	if err == nil {
		resp.Data, err = c.storage.ReadEntry(ledgerID, last)
	}
	switch {
	case err == nil, errors.Is(err, entrylog.ErrNoEntry):
	case errors.Is(err, engine.ErrCorruption):
		// The answer still carries the tracked LAC, a lower bound that is
		// safe for a recovering reader (it reads forward from it), and the
		// fence this read set stays in force. The damage is logged.
		c.log.Error("bookie last entry is corrupt; answering the LAC without it", "ledger", ledgerID, "err", err)
		resp.Data = nil
	default:
		resp.Status, resp.Data = statusOf(err), nil
		return
	}
	resp.LAC = c.lacOf(ledgerID)
}

func (c *Core) readLAC(r *bkproto.Request, resp *bkproto.Response, reply Reply) {
	defer reply(resp)
	if ok, err := c.storage.LedgerExists(r.LedgerID); err != nil || !ok {
		resp.Status = statusOf(err)
		if err == nil {
			resp.Status = bkproto.StatusNoLedger
		}
		return
	}
	explicit, err := c.storage.ExplicitLAC(r.LedgerID)
	if err != nil {
		resp.Status = statusOf(err)
		return
	}
	if len(explicit) >= 8 {
		resp.ExplicitLAC = explicit[8:]
	}
	resp.LAC = c.lacOf(r.LedgerID)
	last, err := c.storage.LastEntryID(r.LedgerID)
	if err == nil {
		resp.Data, err = c.storage.ReadEntry(r.LedgerID, last)
	}
	if err != nil && !errors.Is(err, entrylog.ErrNoEntry) {
		resp.Status, resp.Data, resp.ExplicitLAC = statusOf(err), nil, nil
	}
}

func (c *Core) writeLAC(r *bkproto.Request, answer func(bkproto.Status)) {
	js := c.journal.Load()
	if js == nil {
		answer(bkproto.StatusShuttingDown)
		return
	}
	payload := make([]byte, 8+len(r.Data))
	binary.BigEndian.PutUint64(payload, uint64(r.LAC))
	copy(payload[8:], r.Data)
	s := c.stripe(r.LedgerID)
	c.stripes[s].Lock()
	status := func() bkproto.Status {
		if _, status := c.ledgerForWriteLocked(js, r.LedgerID, r.MasterKey); status != bkproto.StatusOK {
			return status
		}
		if err := c.storage.SetExplicitLAC(r.LedgerID, payload); err != nil {
			c.noteStorageError(err)
			return statusOf(err)
		}
		c.lacs.advance(r.LedgerID, r.LAC, c)
		if err := c.journalAdd(js, r.LedgerID, metaExplicitLAC, payload, func(_ journal.Mark, err error) { answer(statusOf(err)) }); err != nil {
			return statusOf(err)
		}
		return bkproto.StatusOK
	}()
	c.stripes[s].Unlock()
	if status != bkproto.StatusOK {
		answer(status)
	}
}

// forceLedger answers once everything the ledger's journal held before it
// is durable: it queues a barrier record behind them.
func (c *Core) forceLedger(r *bkproto.Request, answer func(bkproto.Status)) {
	js := c.journal.Load()
	if js == nil {
		answer(bkproto.StatusShuttingDown)
		return
	}
	s := c.stripe(r.LedgerID)
	c.stripes[s].Lock()
	st, err := c.ledgerLocked(r.LedgerID)
	c.stripes[s].Unlock()
	switch {
	case err != nil:
		answer(statusOf(err))
	case st == nil:
		answer(bkproto.StatusNoLedger)
	case st.masterKey != nil && !bytes.Equal(st.masterKey, r.MasterKey):
		answer(bkproto.StatusUnauthorized)
	default:
		if err := c.journalAdd(js, r.LedgerID, metaForce, nil, func(_ journal.Mark, err error) { answer(statusOf(err)) }); err != nil {
			answer(statusOf(err))
		}
	}
}

// DeleteLedger drops a ledger (garbage collection of a ledger whose
// metadata is gone).
func (c *Core) DeleteLedger(ledgerID int64) error {
	s := c.stripe(ledgerID)
	c.stripes[s].Lock()
	defer c.stripes[s].Unlock()
	if err := c.storage.DeleteLedger(ledgerID); err != nil {
		return fmt.Errorf("bookie: delete ledger %d: %w", ledgerID, err)
	}
	delete(c.ledgers[s], ledgerID)
	c.lacs.forget(ledgerID)
	return nil
}

// info answers OpInfo from the last disk check (it never blocks). It says
// which later ops this bookie serves, so clients can use them without
// risking a bookie of an older build (which closes the connection on an op
// it does not know).
func (c *Core) info(r *bkproto.Request, reply Reply) {
	resp := &bkproto.Response{Op: r.Op, RequestID: r.RequestID}
	free, total := c.diskSpace()
	resp.FreeBytes, resp.TotalBytes = free, total
	resp.InfoFlags = bkproto.InfoBatchRead
	if ro, _ := c.ReadOnly(); ro {
		resp.InfoFlags |= bkproto.InfoReadOnly
	}
	if c.OutOfSpace() {
		resp.InfoFlags |= bkproto.InfoOutOfSpace
	}
	reply(resp)
}
