package txn

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
)

// End commits or aborts a transaction and returns once it ended
// everywhere, or when ctx ends (the ending goes on then).
func (c *Coordinator) End(ctx context.Context, id ID, commit bool) error {
	want := map[bool]Status{true: Committing, false: Aborting}[commit]
	c.mu.Lock()
	if c.failed != nil {
		c.mu.Unlock()
		return c.closedErr()
	}
	st, ok := c.txns[id.Least]
	if !ok || id.Most != c.cfg.ID {
		c.mu.Unlock()
		return fmt.Errorf("transaction %v: %w", id, ErrNotFound)
	}
	switch st.meta.Status {
	case Open:
		st.meta.Status, st.meta.LastModified = want, c.cfg.Now()
		st.done = make(chan struct{})
		wait := c.appendLocked(st)
		c.mu.Unlock()
		if err := wait(); err != nil {
			st.endErr = err
			close(st.done)
			return err
		}
		c.cfg.Go(func() { c.finish(st) })
	case want:
		c.mu.Unlock()
	default:
		c.mu.Unlock()
		return fmt.Errorf("transaction %v is %v: cannot %s it: %w", id, st.meta.Status,
			map[bool]string{true: "commit", false: "abort"}[commit], ErrInvalidStatus)
	}
	select {
	case <-st.done:
		return st.endErr
	case <-ctx.Done():
		return fmt.Errorf("transaction %v: still ending: %w", id, ctx.Err())
	}
}

// finish ends a committing or aborting transaction on each of its
// partitions and subscriptions, then logs its final status and forgets
// it.
func (c *Coordinator) finish(st *txnState) {
	c.mu.Lock()
	m := st.meta
	c.mu.Unlock()
	commit := m.Status == Committing
	var ends []func()
	for _, p := range m.Partitions {
		ends = append(ends, func() {
			c.retry(func(ctx context.Context) error { return c.cfg.Ender.EndPartition(ctx, p, m.ID, commit) }, m.ID, p)
		})
	}
	for _, s := range m.Subs {
		ends = append(ends, func() {
			c.retry(func(ctx context.Context) error { return c.cfg.Ender.EndSubscription(ctx, s, m.ID, commit) },
				m.ID, s.Topic+" / "+s.Name)
		})
	}
	runAll(ends)
	c.mu.Lock()
	if c.ctx.Err() != nil || c.failed != nil {
		st.endErr = c.closedErr()
		c.mu.Unlock()
		close(st.done)
		return
	}
	st.meta.Status = map[bool]Status{true: Committed, false: Aborted}[commit]
	st.meta.LastModified = c.cfg.Now()
	// The outcome is decided (the COMMITTING or ABORTING record is
	// durable) and applied everywhere: the caller is answered now, and
	// the final record rides the coordinator's next append (Flush's at
	// the latest). If it is lost, recovery ends the transaction again,
	// which changes nothing.
	c.finals = append(c.finals, st.meta)
	delete(c.txns, m.ID.Least)
	c.mu.Unlock()
	if commit {
		c.committed.Add(1)
	} else {
		c.aborted.Add(1)
	}
	close(st.done)
}

// runAll runs fns side by side and returns when all have: the common
// transaction, on one partition, runs on the caller's goroutine (a
// goroutine per transaction grew its stack down the marker's write path).
func runAll(fns []func()) {
	if len(fns) == 1 {
		fns[0]()
		return
	}
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(fn)
	}
	wg.Wait()
}

// retry runs end until it succeeds or the coordinator closes, pausing
// between attempts (doubling up to 5 s).
func (c *Coordinator) retry(end func(context.Context) error, id ID, where string) {
	delay := c.cfg.RetryDelay
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		err := end(ctx)
		cancel()
		if err == nil || c.ctx.Err() != nil {
			return
		}
		if attempt == 1 || attempt%10 == 0 {
			c.cfg.Logger.Warn("ending a transaction failed; retrying", "coordinator", c.cfg.ID, "txn", id.String(),
				"on", where, "attempt", attempt, "err", err)
		}
		select {
		case <-time.After(delay):
		case <-c.ctx.Done():
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// Expire aborts the open transactions whose timeout passed (in the
// background) and returns how many.
func (c *Coordinator) Expire() int {
	now := c.cfg.Now()
	c.mu.Lock()
	var late []ID
	for _, st := range c.txns {
		if st.meta.Status == Open && now.After(st.meta.Deadline()) {
			late = append(late, st.meta.ID)
		}
	}
	c.mu.Unlock()
	for _, id := range late {
		c.cfg.Go(func() {
			if err := c.End(c.ctx, id, false); err == nil {
				c.timedOut.Add(1)
				c.cfg.Logger.Info("transaction timed out; aborted", "coordinator", c.cfg.ID, "txn", id.String())
			}
		})
	}
	return len(late)
}

// Trim drops the log's records that no live transaction needs, after
// recording the highest sequence issued (so ids are never reused).
func (c *Coordinator) Trim(ctx context.Context) error {
	c.mu.Lock()
	before, seq, any := c.last, c.seq, c.last != (managedledger.Position{})
	for _, st := range c.txns {
		if !st.logged {
			continue // nothing of it in the log: it needs nothing kept
		}
		if !st.hasFirst {
			c.mu.Unlock()
			return nil // a first record still being written: next time
		}
		if st.first.Compare(before) < 0 {
			before = st.first
		}
	}
	c.mu.Unlock()
	if !any {
		return nil
	}
	if seq > c.cfg.Log.SavedSequence() {
		if err := c.cfg.Log.SaveSequence(ctx, seq); err != nil {
			return fmt.Errorf("transaction coordinator %d: save sequence: %w", c.cfg.ID, err)
		}
	}
	return c.cfg.Log.Trim(ctx, before)
}

// Get returns a live transaction's state.
func (c *Coordinator) Get(id ID) (Meta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.txns[id.Least]
	if !ok || id.Most != c.cfg.ID {
		return Meta{}, fmt.Errorf("transaction %v: %w", id, ErrNotFound)
	}
	return st.meta, nil
}

// List returns the live transactions, oldest first.
func (c *Coordinator) List() []Meta {
	c.mu.Lock()
	out := make([]Meta, 0, len(c.txns))
	for _, st := range c.txns {
		out = append(out, st.meta)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID.Least < out[j].ID.Least })
	return out
}

// Stats are a coordinator's figures (Pulsar's TransactionCoordinatorStats
// and pulsar_txn_* metrics).
type Stats struct {
	ID                       uint64
	Sequence                 uint64 // the highest least bits issued
	LowWaterMark             uint64 // every transaction below it ended
	Ongoing                  int
	Created, Committed       int64
	Aborted, TimedOut        int64
	RecoverStart, RecoverEnd time.Time
	Failed                   error
}

// Stats returns the coordinator's figures.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	low := c.seq
	for least := range c.txns {
		low = min(low, least-1)
	}
	return Stats{ID: c.cfg.ID, Sequence: c.seq, LowWaterMark: low, Ongoing: len(c.txns),
		Created: c.created.Load(), Committed: c.committed.Load(), Aborted: c.aborted.Load(),
		TimedOut: c.timedOut.Load(), RecoverStart: c.recoverStart, RecoverEnd: c.recoverEnd, Failed: c.failed}
}

// Ongoing is how many transactions are live.
func (c *Coordinator) Ongoing() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.txns)
}
