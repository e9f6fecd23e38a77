package managedledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/ledger"
)

// AddEntry appends data to the current ledger. Callbacks run in append
// order. While a rollover runs, adds wait for the next ledger; a write
// failure other than fencing rolls over too, and the adds that failed
// are appended again to the next ledger (after the failed ledger was
// recovered, so nothing it holds is written twice). If that rollover
// fails, its adds fail and adds stay stopped until ResumeAdds. An entry
// refused for its size (ledger.ErrEntryTooLarge) fails alone: it could
// never be stored, so nothing stored after it overtakes it.
func (ml *bkLedger) AddEntry(data []byte, cb func(Position, error)) {
	ml.addEntry(queuedAdd{data: data, cb: cb})
}

// AddEntryInPlace implements ManagedLedger: the first append encodes the
// ledger entry in the headroom in front of the data (no copy); an append
// again after a failure copies (AppendAsync), since the failed ledger's
// requests may still hold buf.
func (ml *bkLedger) AddEntryInPlace(buf []byte, sum crc32c.Known, cb func(Position, error)) {
	ml.addEntry(queuedAdd{data: buf[EntryHeadroom:], cb: cb, buf: buf, sum: sum})
}

func (ml *bkLedger) addEntry(add queuedAdd) {
	ml.mu.Lock()
	if err := ml.addErrorLocked(); err != nil {
		ml.mu.Unlock()
		add.cb(Position{}, err)
		return
	}
	ml.mu.inflight++
	orig := add.cb
	var start time.Time // read only when stages are recorded: no clock read per add otherwise
	if ml.cfg.Stages != nil {
		start = time.Now()
	}
	add.start = start
	add.cb = func(p Position, err error) {
		ml.cfg.Stages.Since(stage.StorageAdd, start)
		orig(p, err)
		ml.addDone()
	}
	if ml.mu.rolling {
		ml.mu.queued = append(ml.mu.queued, add)
		ml.mu.Unlock()
		return
	}
	if cause := ml.mu.rollErr; cause != nil {
		// The last rollover failed: its writer is closed. Try again, with
		// this add first in the next ledger.
		ml.mu.queued = append(ml.mu.queued, add)
		ml.startRolloverLocked(cause)
		ml.mu.Unlock()
		return
	}
	ml.cfg.Stages.Since(stage.MLQueue, start)
	ml.appendLocked(add)
	if ml.shouldRollLocked() {
		ml.startRolloverLocked(nil)
	}
	ml.mu.Unlock()
}

// startRolloverLocked starts a rollover (cause: the write failure that
// makes it recover the current ledger).
func (ml *bkLedger) startRolloverLocked(cause error) {
	ml.mu.rolling, ml.mu.rollErr = true, nil
	ml.mu.rollDone = make(chan struct{})
	go ml.rollover(cause)
}

// addDone notes that an accepted add's callback returned.
func (ml *bkLedger) addDone() {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.mu.inflight--
	if ml.mu.inflight == 0 && ml.mu.drained != nil {
		close(ml.mu.drained)
		ml.mu.drained = nil
	}
}

func (ml *bkLedger) addErrorLocked() error {
	switch {
	case ml.mu.fenced != nil:
		return fmt.Errorf("%s: add: %w: %v", ml.name, ErrClosed, ml.mu.fenced)
	case ml.mu.closed:
		return fmt.Errorf("%s: add: %w", ml.name, ErrClosed)
	case ml.mu.terminated != nil || ml.mu.terminating:
		return fmt.Errorf("%s: add: %w", ml.name, ErrTerminated)
	case ml.mu.stopped != nil:
		return fmt.Errorf("%s: add: %w (after: %v)", ml.name, ErrAddsStopped, ml.mu.stopped)
	}
	return nil
}

// ResumeAdds implements ManagedLedger.
func (ml *bkLedger) ResumeAdds() {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.mu.stopped = nil
}

func (ml *bkLedger) shouldRollLocked() bool {
	age := time.Since(ml.mu.openedAt)
	if age >= ml.cfg.MaxLedgerRolloverTime && ml.mu.appended > 0 {
		return true
	}
	full := ml.mu.appended >= ml.cfg.MaxEntriesPerLedger || ml.mu.appendSize >= ml.cfg.MaxSizePerLedger
	return full && (age >= ml.cfg.MinLedgerRolloverTime || ml.mu.appended >= ml.cfg.MaxEntriesPerLedger)
}

// appendLocked hands one add to the writer: in place (encoded in buf's
// headroom) when buf is given, else copied.
func (ml *bkLedger) appendLocked(add queuedAdd) {
	w := ml.mu.writer
	ml.mu.appended++
	ml.mu.appendSize += int64(len(add.data))
	data, cb := add.data, add.cb
	done := func(entryID int64, err error) { ml.onAdded(w, data, cb, entryID, err) }
	if add.buf != nil {
		w.AppendAsyncInPlace(add.buf, add.sum, done)
		return
	}
	w.AppendAsync(data, done)
}

// onAdded runs in append order on the writer's delivery goroutine.
func (ml *bkLedger) onAdded(w *ledger.WriteHandle, data []byte, cb func(Position, error), entryID int64, err error) {
	ml.mu.Lock()
	if err != nil {
		fail := ml.addFailedLocked(w, data, cb, err)
		ml.mu.Unlock()
		if fail != nil {
			fail() // here, on the delivery goroutine: in append order
		}
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
	ml.mu.failures = 0 // stored: the run of failures is over
	pos := Position{w.ID(), entryID}
	ml.cacheAddedLocked(pos, data)
	woken := ml.takeWaitersLocked()
	ml.mu.Unlock()
	cb(pos, nil)
	for _, wake := range woken {
		wake()
	}
}

// cacheAddedLocked puts an entry just added into the cache if a cursor
// may read it: a subscription's or a reader's. As Pulsar (which caches
// adds only with active cursors), a managed ledger nobody reads (a
// topic with no subscription yet, a coordinator's log) keeps its entries
// out of the cache, where they would push out what tailing readers of
// other topics need and hold the heap at the cache's size for nothing.
// A reader that comes later reads them from the bookies.
func (ml *bkLedger) cacheAddedLocked(pos Position, data []byte) {
	if len(ml.mu.cursors) == 0 && len(ml.mu.nonDurable) == 0 {
		return
	}
	ml.f.cache.put(cacheKey{ml.id, pos}, data)
}

// addFailedLocked handles the first failed add of a writer: the adds
// after it fail too, in order, and all of them are queued again. When the
// add fails for good it returns the callback call to make once mu is
// released.
func (ml *bkLedger) addFailedLocked(w *ledger.WriteHandle, data []byte, cb func(Position, error), err error) func() {
	if errors.Is(err, ledger.ErrEntryTooLarge) {
		// No bookie takes it, in this ledger or the next: it fails alone
		// (the writer took no entry id for it and goes on), with no
		// rollover; appended again it would fail after every rollover.
		return func() { cb(Position{}, fmt.Errorf("%s: add of %d bytes: %w", ml.name, len(data), err)) }
	}
	if errors.Is(err, ledger.ErrFenced) {
		if ml.mu.fenced == nil {
			ml.mu.fenced = err
			ml.f.log.Warn("managed ledger fenced by another owner; closing it here", "managed_ledger", ml.name, "ledger", w.ID())
		}
		return func() { cb(Position{}, fmt.Errorf("%s: add: %w: %v", ml.name, ErrClosed, err)) }
	}
	if ml.mu.closed {
		return func() { cb(Position{}, fmt.Errorf("%s: add: %w", ml.name, ErrClosed)) }
	}
	ml.mu.failed = append(ml.mu.failed, queuedAdd{data: data, cb: cb})
	if ml.mu.writer == w && !ml.mu.rolling {
		ml.noteFailureLocked()
		ml.f.log.Warn("managed ledger write failed; rolling over to a new ledger", "managed_ledger", ml.name, "ledger", w.ID(),
			"failures", ml.mu.failures, "err", err)
		ml.startRolloverLocked(err)
	}
	return nil
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
		err = ml.nextLedger(ctx, cause)
	}
	ml.mu.Lock()
	if err != nil {
		ml.noteFailureLocked()
	}
	ml.mu.rolling = false
	close(ml.mu.rollDone)
	queued := append(ml.mu.failed, ml.mu.queued...)
	ml.mu.failed, ml.mu.queued = nil, nil
	if err != nil || ml.mu.closed || ml.mu.fenced != nil {
		if err != nil && !ml.mu.closed && ml.mu.fenced == nil {
			ml.mu.rollErr = err // the writer is closed: the next add retries
			if len(queued) > 0 {
				// Set before mu is released: an add made while the failed
				// ones call back must not start a rollover that stores it.
				ml.mu.stopped = err
			}
		}
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
		if !q.start.IsZero() {
			ml.cfg.Stages.Since(stage.MLQueue, q.start)
		}
		ml.appendLocked(q)
	}
	// The queued adds may have filled the new ledger: roll now, as an add
	// would, or the next add lands in it too and the ledger stays
	// untrimmable one entry past what its cursors consumed.
	if ml.shouldRollLocked() {
		ml.startRolloverLocked(nil)
	}
	ml.mu.Unlock()
}

// nextLedger starts the ledger after the closed one, after the backoff
// due, unless the managed ledger closed or its failed adds were appended
// again often enough (then they fail with cause).
func (ml *bkLedger) nextLedger(ctx context.Context, cause error) error {
	ml.sealCurrent()
	ml.mu.Lock()
	exhausted, n := ml.retriesExhaustedLocked(), ml.mu.failures
	ml.mu.Unlock()
	if exhausted {
		return fmt.Errorf("%s: %d writes in a row failed: %w", ml.name, n, cause)
	}
	if !ml.waitBackoff() {
		return nil // a closed ledger starts no next one (Close closes the current writer)
	}
	return ml.startLedger(ctx)
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
		ml.cacheAddedLocked(pos, q.data)
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

// Terminate rejects new adds, waits for those accepted before it, and
// stores the position of the last one as the end of the stream.
func (ml *bkLedger) Terminate(ctx context.Context) (Position, error) {
	ml.mu.Lock()
	if ml.mu.terminated != nil {
		p := *ml.mu.terminated
		ml.mu.Unlock()
		return p, nil
	}
	ml.mu.terminating = true
	for ml.mu.inflight > 0 {
		if ml.mu.drained == nil {
			ml.mu.drained = make(chan struct{})
		}
		drained := ml.mu.drained
		ml.mu.Unlock()
		select {
		case <-drained:
		case <-ctx.Done():
			ml.mu.Lock()
			if ml.mu.terminated == nil {
				ml.mu.terminating = false
			}
			ml.mu.Unlock()
			return Position{}, ctx.Err()
		}
		ml.mu.Lock()
	}
	ml.mu.Unlock()
	ml.metaMu.Lock()
	defer ml.metaMu.Unlock()
	ml.mu.Lock()
	if ml.mu.terminated != nil { // a concurrent Terminate stored it
		p := *ml.mu.terminated
		ml.mu.Unlock()
		return p, nil
	}
	last := ml.positionLocked(ml.endLocked() - 1)
	md, version := ml.metadataLocked(ml.mu.ledgers), ml.mu.version
	md.Terminated = &last
	ml.mu.Unlock()
	v, err := ml.writeMetadata(ctx, md, version)
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if err != nil {
		ml.mu.terminating = false // not terminated: a retry stores it
		return Position{}, err
	}
	ml.mu.version, ml.mu.terminated = v, &last
	return last, nil
}

// Properties implements ManagedLedger.
func (ml *bkLedger) Properties() map[string]string {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return maps.Clone(ml.mu.props)
}

// UpdateProperties implements ManagedLedger: the new properties are
// written with the ledger list as it is, under metaMu like every metadata
// write, and take effect here only once stored.
func (ml *bkLedger) UpdateProperties(ctx context.Context, set map[string]string, remove []string) error {
	ml.metaMu.Lock()
	defer ml.metaMu.Unlock()
	ml.mu.Lock()
	if err := ml.mu.fenced; err != nil {
		ml.mu.Unlock()
		return err
	}
	props := maps.Clone(ml.mu.props)
	if props == nil {
		props = map[string]string{}
	}
	maps.Copy(props, set)
	for _, k := range remove {
		delete(props, k)
	}
	if len(props) == 0 {
		props = nil
	}
	md, version := ml.metadataLocked(ml.mu.ledgers), ml.mu.version
	md.Properties = props
	ml.mu.Unlock()
	v, err := ml.writeMetadata(ctx, md, version)
	if err != nil {
		return err
	}
	ml.mu.Lock()
	ml.mu.version, ml.mu.props = v, props
	ml.mu.Unlock()
	return nil
}
