package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
)

// Errors, each answered with Pulsar's ServerError by the broker.
var (
	ErrNotFound      = errors.New("transaction not found")          // TransactionNotFound
	ErrInvalidStatus = errors.New("invalid transaction status")     // InvalidTxnStatus
	ErrClosed        = errors.New("transaction coordinator closed") // TransactionCoordinatorNotFound
)

// Log is where a coordinator keeps its records (a managed ledger on the
// broker: MLLog; MemoryLog in tests).
type Log interface {
	// Append adds rec and calls cb once it is durable; callbacks run in
	// append order.
	Append(rec []byte, cb func(managedledger.Position, error))
	// Replay calls fn for every record kept, in order.
	Replay(ctx context.Context, fn func(managedledger.Position, []byte) error) error
	// Trim drops the records before pos.
	Trim(ctx context.Context, before managedledger.Position) error
	// SavedSequence is the sequence SaveSequence last recorded (0: none).
	SavedSequence() uint64
	SaveSequence(ctx context.Context, seq uint64) error
}

// Ender ends a transaction on one partition or subscription (the broker:
// END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION on their owners).
// Ending twice must be harmless: after a failure the coordinator ends
// again where it does not know whether the first attempt landed.
type Ender interface {
	EndPartition(ctx context.Context, topic string, id ID, commit bool) error
	EndSubscription(ctx context.Context, sub Subscription, id ID, commit bool) error
}

// Config sets up a coordinator.
type Config struct {
	ID     uint64 // the assign partition's index: every id's most bits
	Log    Log
	Ender  Ender
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// RetryDelay is the first pause between attempts to end a
	// transaction on a partition that failed (doubling to 5 s; 100 ms
	// when zero).
	RetryDelay time.Duration
	// Go runs the coordinator's background work (the ending of each
	// committed or aborted transaction, down the marker's write path)
	// without blocking: the broker's goroutine pool, whose goroutines
	// keep the stacks that path grew (a fresh goroutine per commit spent
	// a thirtieth of the broker's CPU growing its stack). A go statement
	// when nil.
	Go func(func())
}

// Coordinator is one transaction coordinator (see the package doc).
type Coordinator struct {
	cfg    Config
	ctx    context.Context // ended by Close: stops the retries of ending
	cancel context.CancelFunc

	mu   sync.Mutex
	txns map[uint64]*txnState
	seq  uint64
	// reserved: ids up to it may be issued without saving (New).
	reserved uint64
	failed   error // set once: the log refused a record
	last     managedledger.Position
	// Records waiting for a ride (appendLocked takes them along; Flush
	// writes them when nothing else is appended): unlogged holds open
	// transactions New has written nothing of (some may have been logged
	// since), finals the final records of ended transactions.
	unlogged []*txnState
	finals   []Meta
	// The log entry in flight (nil: none) and the one waiting for it to
	// land (appendLocked).
	appending, next *logBatch

	recoverStart, recoverEnd              time.Time
	created, committed, aborted, timedOut atomic.Int64
}

type txnState struct {
	meta Meta
	// logged: a record of it was appended; first (once hasFirst) is
	// where its first one is.
	logged   bool
	first    managedledger.Position
	hasFirst bool
	// done is closed when an End finishes (nil while open); endErr says
	// how.
	done   chan struct{}
	endErr error
}

// Recover loads a coordinator from its log: open transactions stay open,
// those that were ending are ended again in the background.
func Recover(ctx context.Context, cfg Config) (*Coordinator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 100 * time.Millisecond
	}
	if cfg.Go == nil {
		cfg.Go = func(fn func()) { go fn() }
	}
	c := &Coordinator{cfg: cfg, txns: map[uint64]*txnState{}, recoverStart: cfg.Now()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	err := cfg.Log.Replay(ctx, func(pos managedledger.Position, rec []byte) error {
		ms, err := decodeEntry(cfg.ID, rec)
		if err != nil {
			return fmt.Errorf("transaction log of coordinator %d at %v: %w", cfg.ID, pos, err)
		}
		for _, m := range ms {
			c.replayed(pos, m)
		}
		return nil
	})
	if err != nil {
		c.cancel()
		return nil, err
	}
	// Ids up to the last reservation may have been issued, their
	// records lost: the next one is above it.
	c.seq = max(c.seq, cfg.Log.SavedSequence())
	c.reserved = c.seq
	c.recoverEnd = cfg.Now()
	// Collected first: a finish deletes its transaction from the map
	// (under mu), which must not happen while this ranges over it.
	var ending []*txnState
	for _, st := range c.txns {
		if st.meta.Status == Committing || st.meta.Status == Aborting {
			st.done = make(chan struct{})
			ending = append(ending, st)
		}
	}
	for _, st := range ending {
		cfg.Go(func() { c.finish(st) })
	}
	return c, nil
}

func (c *Coordinator) replayed(pos managedledger.Position, m Meta) {
	c.seq = max(c.seq, m.ID.Least)
	c.last = pos
	if m.Status.ended() {
		delete(c.txns, m.ID.Least)
		return
	}
	st, ok := c.txns[m.ID.Least]
	if !ok {
		st = &txnState{logged: true, first: pos, hasFirst: true}
		c.txns[m.ID.Least] = st
	}
	st.meta = m
}

// Close stops the coordinator: its ending retries stop, and every call
// after fails with ErrClosed.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.failed == nil {
		c.failed = ErrClosed
	}
	c.mu.Unlock()
	c.cancel()
}

// Failed is why the coordinator stopped (nil while it works).
func (c *Coordinator) Failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// sequenceBlock is how many ids a coordinator reserves at a time
// (SaveSequence): New answers before its record is durable, so an id must
// be known never to be issued again even if that record is lost.
const sequenceBlock = 10000

// New opens a transaction timing out after timeout. It answers once the
// id is reserved, and writes nothing: its record rides the coordinator's
// next append (of any transaction; Flush's at the latest), so the common
// transaction, given a partition at once, costs the log no entry for its
// opening. A record lost in a crash makes the transaction unknown to the
// recovered coordinator, so the client's next request for it fails
// (TransactionNotFound) before anything of it is written anywhere, since
// adding a partition or subscription waits for a record of it.
func (c *Coordinator) New(timeout time.Duration) (ID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return ID{}, c.closedErr()
	}
	if c.seq+1 > c.reserved {
		// Rare (once per sequenceBlock ids), and New must not run ahead
		// of it: held under mu.
		next := max(c.seq, c.reserved) + sequenceBlock
		if err := c.cfg.Log.SaveSequence(c.ctx, next); err != nil {
			return ID{}, fmt.Errorf("transaction coordinator %d: reserve ids: %w", c.cfg.ID, err)
		}
		c.reserved = next
	}
	return c.newLocked(timeout), nil
}

// TryNew is New when it can answer without waiting (an id is reserved);
// false when New must reserve more first, which waits for the log's
// metadata. The broker answers NEW_TXN on the connection's event loop
// with it.
func (c *Coordinator) TryNew(timeout time.Duration) (ID, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return ID{}, true, c.closedErr()
	}
	if c.seq+1 > c.reserved {
		return ID{}, false, nil
	}
	return c.newLocked(timeout), true, nil
}

func (c *Coordinator) newLocked(timeout time.Duration) ID {
	c.seq++
	now := c.cfg.Now()
	st := &txnState{meta: Meta{ID: ID{c.cfg.ID, c.seq}, Status: Open, Start: now, Timeout: timeout, LastModified: now}}
	c.txns[c.seq] = st
	c.unlogged = append(c.unlogged, st)
	c.created.Add(1)
	return st.meta.ID
}

// AddPartitions adds the partitions an open transaction produces to.
func (c *Coordinator) AddPartitions(id ID, partitions []string) error {
	return c.update(id, func(m *Meta) (changed bool) {
		m.Partitions, changed = addMissing(m.Partitions, partitions)
		return changed
	})
}

// AddSubscriptions adds the subscriptions an open transaction
// acknowledges on.
func (c *Coordinator) AddSubscriptions(id ID, subs []Subscription) error {
	return c.update(id, func(m *Meta) (changed bool) {
		m.Subs, changed = addMissing(m.Subs, subs)
		return changed
	})
}

// addMissing appends the elements of add that list lacks, and reports
// whether it appended any.
func addMissing[T comparable](list, add []T) ([]T, bool) {
	n := len(list)
	for _, v := range add {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list, len(list) != n
}

// update changes an open transaction and logs it (nothing is logged when
// change reports no change).
func (c *Coordinator) update(id ID, change func(*Meta) bool) error {
	c.mu.Lock()
	st, err := c.openLocked(id)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if !change(&st.meta) {
		c.mu.Unlock()
		return nil
	}
	st.meta.LastModified = c.cfg.Now()
	wait := c.appendLocked(st)
	c.mu.Unlock()
	return wait()
}

func (c *Coordinator) openLocked(id ID) (*txnState, error) {
	if c.failed != nil {
		return nil, c.closedErr()
	}
	st, ok := c.txns[id.Least]
	if !ok || id.Most != c.cfg.ID {
		return nil, fmt.Errorf("transaction %v: %w", id, ErrNotFound)
	}
	if st.meta.Status != Open {
		return nil, fmt.Errorf("transaction %v is %v, not OPEN: %w", id, st.meta.Status, ErrInvalidStatus)
	}
	return st, nil
}

func (c *Coordinator) closedErr() error {
	return fmt.Errorf("transaction coordinator %d: %w (%v)", c.cfg.ID, ErrClosed, c.failed)
}

// logBatch is one log entry's records: written (appending) or waiting
// for the entry before it to land (next).
type logBatch struct {
	recs   [][]byte
	firsts []*txnState // logged for the first time here
	done   chan struct{}
	// Set before done is closed.
	pos managedledger.Position
	err error
	// landed: its outcome was applied (landedLocked, under mu).
	landed bool
}

// appendLocked logs st's state, with the records waiting for a ride, and
// returns a wait that reports how it went (a failure fails the
// coordinator). The log has one entry of a coordinator in flight at a
// time: changes made meanwhile share the next entry (group commit, as
// Pulsar's batched transaction log, with the write in flight as the delay),
// so a busy coordinator writes an entry per round trip to its bookies
// rather than one per change. Called under mu, so the log's order is the
// order of the changes. st may be nil (Flush): then wait is nil when no
// record is due.
func (c *Coordinator) appendLocked(st *txnState) func() error {
	b := c.next
	if b == nil {
		b = &logBatch{done: make(chan struct{})}
	}
	add := func(s *txnState) {
		if !s.logged {
			s.logged = true
			b.firsts = append(b.firsts, s)
		}
		b.recs = append(b.recs, encode(s.meta))
	}
	if st != nil {
		add(st)
	}
	for _, s := range c.unlogged {
		if !s.logged && c.txns[s.meta.ID.Least] == s {
			add(s)
		}
	}
	clear(c.unlogged)
	c.unlogged = c.unlogged[:0]
	for _, m := range c.finals {
		b.recs = append(b.recs, encode(m))
	}
	clear(c.finals)
	c.finals = c.finals[:0]
	if len(b.recs) == 0 {
		return nil
	}
	c.next = b
	if c.appending == nil {
		c.launchLocked()
	}
	return func() error { return c.waitFor(b) }
}

// launchLocked writes the next batch.
func (c *Coordinator) launchLocked() {
	b := c.next
	c.next, c.appending = nil, b
	// The callback may run before Append returns (mu still held): it
	// only hands the outcome over; waitFor applies it.
	c.cfg.Log.Append(encodeEntry(b.recs), func(pos managedledger.Position, err error) {
		b.pos, b.err = pos, err
		close(b.done)
	})
}

// waitFor waits until b landed, applies its outcome (the first of its
// waiters to wake does, and writes the batch that waited for it) and
// reports it.
func (c *Coordinator) waitFor(b *logBatch) error {
	<-b.done
	c.mu.Lock()
	defer c.mu.Unlock()
	c.landedLocked(b)
	if b.err != nil {
		return fmt.Errorf("transaction coordinator %d: log: %w", c.cfg.ID, b.err)
	}
	return nil
}

func (c *Coordinator) landedLocked(b *logBatch) {
	if b.landed {
		return
	}
	b.landed = true
	if b.err != nil {
		if c.failed == nil {
			c.failed = b.err
			c.cfg.Logger.Error("transaction log write failed; coordinator stops until it is loaded again",
				"coordinator", c.cfg.ID, "err", b.err)
		}
	} else {
		if b.pos.Compare(c.last) > 0 {
			c.last = b.pos
		}
		for _, s := range b.firsts {
			s.first, s.hasFirst = b.pos, true
		}
	}
	if c.appending == b {
		c.appending = nil
	}
	if c.next == nil {
		return
	}
	if c.failed != nil {
		// Never written: the log may not take records after one it
		// refused (the memory must not run ahead of it).
		n := c.next
		c.next = nil
		n.err = fmt.Errorf("not written: the coordinator stopped: %w", c.failed)
		close(n.done)
		return
	}
	c.launchLocked()
}

// Flush appends the records waiting for a ride, if any (the broker calls
// it every second): so an open transaction is in the log within a second
// even when nothing else is written, and a crash makes the recovered
// coordinator end again at most that much of what had already ended.
func (c *Coordinator) Flush() {
	c.mu.Lock()
	if c.failed != nil {
		c.mu.Unlock()
		return
	}
	wait := c.appendLocked(nil)
	c.mu.Unlock()
	if wait != nil {
		c.cfg.Go(func() { _ = wait() }) // a failure fails the coordinator
	}
}
