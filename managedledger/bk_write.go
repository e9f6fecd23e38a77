package managedledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
)

// AddEntry appends data to the current ledger. Callbacks run in append
// order. While a rollover runs, adds wait for the next ledger; a write
// failure other than fencing rolls over too, and the adds that failed
// are appended again to the next ledger (after the failed ledger was
// recovered, so nothing it holds is written twice).
func (ml *bkLedger) AddEntry(data []byte, cb func(Position, error)) {
	ml.mu.Lock()
	if err := ml.addErrorLocked(); err != nil {
		ml.mu.Unlock()
		cb(Position{}, err)
		return
	}
	if ml.mu.rolling {
		ml.mu.queued = append(ml.mu.queued, queuedAdd{data, cb})
		ml.mu.Unlock()
		return
	}
	ml.appendLocked(data, cb)
	if ml.shouldRollLocked() {
		ml.mu.rolling = true
		go ml.rollover(nil)
	}
	ml.mu.Unlock()
}

func (ml *bkLedger) addErrorLocked() error {
	switch {
	case ml.mu.fenced != nil:
		return fmt.Errorf("%s: add: %w: %v", ml.name, ErrClosed, ml.mu.fenced)
	case ml.mu.closed:
		return fmt.Errorf("%s: add: %w", ml.name, ErrClosed)
	case ml.mu.terminated != nil:
		return fmt.Errorf("%s: add: %w", ml.name, ErrTerminated)
	}
	return nil
}

func (ml *bkLedger) shouldRollLocked() bool {
	age := time.Since(ml.mu.openedAt)
	if age >= ml.cfg.MaxLedgerRolloverTime && ml.mu.appended > 0 {
		return true
	}
	full := ml.mu.appended >= ml.cfg.MaxEntriesPerLedger || ml.mu.appendSize >= ml.cfg.MaxSizePerLedger
	return full && (age >= ml.cfg.MinLedgerRolloverTime || ml.mu.appended >= ml.cfg.MaxEntriesPerLedger)
}

// appendLocked hands one add to the writer.
func (ml *bkLedger) appendLocked(data []byte, cb func(Position, error)) {
	w := ml.mu.writer
	ml.mu.appended++
	ml.mu.appendSize += int64(len(data))
	w.AppendAsync(data, func(entryID int64, err error) { ml.onAdded(w, data, cb, entryID, err) })
}

// onAdded runs in append order on the writer's delivery goroutine.
func (ml *bkLedger) onAdded(w *ledger.WriteHandle, data []byte, cb func(Position, error), entryID int64, err error) {
	ml.mu.Lock()
	if err != nil {
		ml.addFailedLocked(w, data, cb, err)
		ml.mu.Unlock()
		return
	}
	cur := ml.mu.ledgers[len(ml.mu.ledgers)-1]
	if cur.meta.ID != w.ID() || entryID != cur.meta.Entries {
		// Cannot happen: completions are in order, one writer at a time.
		ml.mu.Unlock()
		cb(Position{}, fmt.Errorf("%s: ledger %d completed entry %d out of order (expected %d:%d)", ml.name, w.ID(), entryID, cur.meta.ID, cur.meta.Entries))
		return
	}
	cur.meta.Entries++
	cur.meta.Size += int64(len(data))
	pos := Position{w.ID(), entryID}
	ml.f.cache.put(cacheKey{ml.id, pos}, data)
	woken := ml.takeWaitersLocked()
	ml.mu.Unlock()
	cb(pos, nil)
	for _, wake := range woken {
		wake()
	}
}

// addFailedLocked handles the first failed add of a writer: the adds
// after it fail too, in order, and all of them are queued again.
func (ml *bkLedger) addFailedLocked(w *ledger.WriteHandle, data []byte, cb func(Position, error), err error) {
	if errors.Is(err, ledger.ErrFenced) {
		if ml.mu.fenced == nil {
			ml.mu.fenced = err
			ml.f.log.Warn("managed ledger fenced by another owner; closing it here", "managed_ledger", ml.name, "ledger", w.ID())
		}
		go cb(Position{}, fmt.Errorf("%s: add: %w: %v", ml.name, ErrClosed, err))
		return
	}
	if ml.mu.closed {
		go cb(Position{}, fmt.Errorf("%s: add: %w", ml.name, ErrClosed))
		return
	}
	ml.mu.failed = append(ml.mu.failed, queuedAdd{data, cb})
	if ml.mu.writer == w && !ml.mu.rolling {
		ml.mu.rolling = true
		ml.f.log.Warn("managed ledger write failed; rolling over to a new ledger", "managed_ledger", ml.name, "ledger", w.ID(), "err", err)
		go ml.rollover(err)
	}
}

// rollover closes the current ledger (recovering it after a write
// failure), starts the next one and appends what queued meanwhile.
func (ml *bkLedger) rollover(cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ml.mu.Lock()
	w := ml.mu.writer
	ml.mu.Unlock()
	err := w.Close(ctx)
	<-w.Delivered() // every callback of the old ledger ran: failed adds are all in ml.mu.failed
	if cause != nil || err != nil {
		err = ml.recoverFailed(ctx, w)
	}
	if err == nil {
		ml.sealCurrent()
		err = ml.startLedger(ctx)
	}
	ml.mu.Lock()
	ml.mu.rolling = false
	queued := append(ml.mu.failed, ml.mu.queued...)
	ml.mu.failed, ml.mu.queued = nil, nil
	if err != nil || ml.mu.closed || ml.mu.fenced != nil {
		ml.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("%s: %w", ml.name, ErrClosed)
		}
		for _, q := range queued {
			q.cb(Position{}, fmt.Errorf("%s: add: rollover failed: %w", ml.name, err))
		}
		return
	}
	for _, q := range queued {
		ml.appendLocked(q.data, q.cb)
	}
	ml.mu.Unlock()
}

// recoverFailed closes a ledger whose writer failed by recovering it: the
// entries it holds past what this writer saw confirmed are confirmed now
// (their adds were queued again: those are completed here instead).
func (ml *bkLedger) recoverFailed(ctx context.Context, w *ledger.WriteHandle) error {
	r, err := ml.cfg.Ledgers.OpenRecover(ctx, w.ID(), ml.cfg.Password)
	if err != nil {
		return fmt.Errorf("%s: recover failed ledger %d: %w", ml.name, w.ID(), err)
	}
	last := r.Metadata().LastEntryID
	ml.mu.Lock()
	cur := ml.mu.ledgers[len(ml.mu.ledgers)-1]
	var done []func()
	for cur.meta.Entries <= last && len(ml.mu.failed) > 0 {
		q := ml.mu.failed[0]
		ml.mu.failed = ml.mu.failed[1:]
		pos := Position{cur.meta.ID, cur.meta.Entries}
		cur.meta.Entries++
		cur.meta.Size += int64(len(q.data))
		ml.f.cache.put(cacheKey{ml.id, pos}, q.data)
		done = append(done, func() { q.cb(pos, nil) })
	}
	done = append(done, ml.takeWaitersLocked()...)
	ml.mu.Unlock()
	for _, d := range done {
		d()
	}
	return nil
}

// sealCurrent stamps the closed ledger's close time.
func (ml *bkLedger) sealCurrent() {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.mu.ledgers[len(ml.mu.ledgers)-1].meta.Timestamp = time.Now().UnixMilli()
}

func (ml *bkLedger) Terminate(ctx context.Context) (Position, error) {
	ml.mu.Lock()
	if ml.mu.terminated != nil {
		p := *ml.mu.terminated
		ml.mu.Unlock()
		return p, nil
	}
	last := ml.positionLocked(ml.endLocked() - 1)
	ml.mu.terminated = &last
	md, version := ml.metadataLocked(ml.mu.ledgers), ml.mu.version
	ml.mu.Unlock()
	v, err := ml.writeMetadata(ctx, md, version)
	if err != nil {
		return Position{}, err
	}
	ml.mu.Lock()
	ml.mu.version = v
	ml.mu.Unlock()
	return last, nil
}
