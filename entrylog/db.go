package entrylog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/internal/invariants"
)

// DB is a bookie's ledger storage on disk: one independent storage per
// ledger directory (its entry logs and its Pebble index), ledgers mapped to
// directories by id modulo their number, as in BookKeeper.
//
// Lock rules: life is held shared by every public call for its duration
// and exclusively by Close, so nothing is closed under a call. flushMu
// makes DB-wide flushes (and so checkpoints) one at a time. Each
// directory's locks are described on shard.
type DB struct {
	opts   Options
	log    *slog.Logger
	shards []*shard
	fail   failure

	flushMu sync.Mutex

	life    sync.RWMutex
	closed  bool // guarded by life
	closing atomic.Bool

	ctx          context.Context // cancelled by Close: stops GC
	cancel       context.CancelFunc
	stopLoops    chan struct{}
	loops        sync.WaitGroup
	stopFlushers chan struct{}
	flushers     sync.WaitGroup
}

var _ Storage = (*DB)(nil)

// Open opens the storage in dirs (creating what is missing), one
// directory per disk. The same dirs must be given, in the same order,
// every time: a ledger's directory is its id modulo len(dirs).
func Open(fs engine.FS, dirs []string, opts Options) (*DB, error) {
	if err := checkDirs(dirs); err != nil {
		return nil, err
	}
	if opts.IndexFS == nil {
		// On the mem engine the index lives and crashes with fs.
		opts.IndexFS = memIndexFS(fs)
	}
	opts = opts.withDefaults(fs)
	if err := opts.validate(); err != nil {
		return nil, err
	}
	d := &DB{opts: opts, log: opts.Logger.With("component", "entrylog"),
		stopLoops: make(chan struct{}), stopFlushers: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	per := opts.perDirectory(len(dirs))
	for _, dir := range dirs {
		s, err := openShard(fs, dir, per, &d.fail, &counters{})
		if err != nil {
			for _, o := range d.shards {
				err = errors.Join(err, o.close())
			}
			d.cancel()
			return nil, err
		}
		d.shards = append(d.shards, s)
	}
	d.start()
	return d, nil
}

func checkDirs(dirs []string) error {
	if len(dirs) == 0 {
		return errors.New("entrylog: no ledger directories")
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		c := filepath.Clean(dir)
		if seen[c] {
			return fmt.Errorf("entrylog: ledger directory %s given twice", dir)
		}
		seen[c] = true
	}
	return nil
}

// start runs each directory's flusher, the periodic flush and GC.
func (d *DB) start() {
	for _, s := range d.shards {
		d.flushers.Add(1)
		go d.runFlusher(s)
	}
	if d.opts.FlushInterval > 0 {
		d.loops.Add(1)
		go d.flushLoop()
	}
	if d.opts.GCWaitTime > 0 {
		d.loops.Add(1)
		go d.gcLoop()
	}
}

// runFlusher flushes a write-cache half as soon as AddEntry swaps one out.
func (d *DB) runFlusher(s *shard) {
	defer d.flushers.Done()
	for {
		select {
		case <-d.stopFlushers:
			return
		case <-s.wc.kick:
			_ = s.flush(false, true) // a failure is recorded (and logged) by the shard
		}
	}
}

func (d *DB) flushLoop() {
	defer d.loops.Done()
	t := time.NewTicker(d.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stopLoops:
			return
		case <-t.C:
			if d.fail.check() != nil {
				continue
			}
			if err := d.flushAll(true); err != nil && !errors.Is(err, ErrFailed) && !errors.Is(err, ErrClosed) {
				d.log.Warn("periodic flush failed", "err", err)
			}
		}
	}
}

func (d *DB) gcLoop() {
	defer d.loops.Done()
	t := time.NewTicker(d.opts.GCWaitTime)
	defer t.Stop()
	lastMinor, lastMajor := time.Now(), time.Now()
	for {
		select {
		case <-d.stopLoops:
			return
		case now := <-t.C:
			threshold := 0.0
			switch {
			case d.opts.MajorCompactionThreshold > 0 && now.Sub(lastMajor) >= d.opts.MajorCompactionInterval:
				threshold, lastMajor, lastMinor = d.opts.MajorCompactionThreshold, now, now
			case d.opts.MinorCompactionThreshold > 0 && now.Sub(lastMinor) >= d.opts.MinorCompactionInterval:
				threshold, lastMinor = d.opts.MinorCompactionThreshold, now
			}
			err := d.Compact(d.ctx, threshold)
			if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFailed) && !errors.Is(err, context.Canceled) {
				d.log.Warn("garbage collection failed", "err", err)
			}
		}
	}
}

// enter starts a public call; exit ends it.
func (d *DB) enter() error {
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (d *DB) exit() { d.life.RUnlock() }

func (d *DB) shardFor(ledgerID int64) *shard {
	return d.shards[uint64(ledgerID)%uint64(len(d.shards))]
}

// SetMasterKey implements Storage. On a deleted ledger it does nothing.
func (d *DB) SetMasterKey(ledgerID int64, key []byte) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.shardFor(ledgerID).setMasterKey(ledgerID, key)
}

// MasterKey implements Storage.
func (d *DB) MasterKey(ledgerID int64) ([]byte, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).masterKey(ledgerID)
}

// SetFenced implements Storage.
func (d *DB) SetFenced(ledgerID int64) (bool, error) {
	if err := d.enter(); err != nil {
		return false, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).setFenced(ledgerID)
}

// IsFenced implements Storage.
func (d *DB) IsFenced(ledgerID int64) (bool, error) {
	if err := d.enter(); err != nil {
		return false, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).isFenced(ledgerID)
}

// SetExplicitLAC implements Storage.
func (d *DB) SetExplicitLAC(ledgerID int64, lac []byte) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.shardFor(ledgerID).setExplicitLAC(ledgerID, lac)
}

// ExplicitLAC implements Storage.
func (d *DB) ExplicitLAC(ledgerID int64) ([]byte, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).explicitLAC(ledgerID)
}

// LedgerExists implements Storage.
func (d *DB) LedgerExists(ledgerID int64) (bool, error) {
	if err := d.enter(); err != nil {
		return false, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).hasLedger(ledgerID), nil
}

// AddEntry implements Storage. It waits, at most MaxThrottleTime, while the
// ledger's directory has both write-cache halves full. On a deleted ledger
// it does nothing (journal replay may bring back entries of ledgers deleted
// since; see the package doc).
func (d *DB) AddEntry(ledgerID, entryID int64, data []byte) error {
	return d.AddEntrySummed(ledgerID, entryID, data, crc32c.Known{})
}

// AddEntrySummed implements SummedAdder.
func (d *DB) AddEntrySummed(ledgerID, entryID int64, data []byte, sum crc32c.Known) error {
	return d.add(ledgerID, entryID, data, sum, false)
}

// AddEntryKept implements KeepingAdder.
func (d *DB) AddEntryKept(ledgerID, entryID int64, data []byte, sum crc32c.Known) error {
	return d.add(ledgerID, entryID, data, sum, true)
}

func (d *DB) add(ledgerID, entryID int64, data []byte, sum crc32c.Known, keep bool) error {
	if invariants.Enabled && !sum.Matches(data) {
		invariants.Failf("entrylog: add of ledger %d entry %d with CRC %08x, not the data's", ledgerID, entryID, sum.CRC)
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.shardFor(ledgerID).addEntry(ledgerID, entryID, data, sum, keep)
}

// ReadEntry implements Storage. A record that fails its checks is an
// error matching engine.ErrCorruption, never ErrNoEntry.
func (d *DB) ReadEntry(ledgerID, entryID int64) ([]byte, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).readEntry(ledgerID, entryID)
}

// LastEntryID implements Storage.
func (d *DB) LastEntryID(ledgerID int64) (int64, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.exit()
	return d.shardFor(ledgerID).lastEntryID(ledgerID)
}

// DeleteLedger implements Storage: the ledger's state and index entries go
// and a tombstone is written, synced before it returns.
func (d *DB) DeleteLedger(ledgerID int64) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.shardFor(ledgerID).deleteLedger(ledgerID)
}

// Ledgers implements Storage.
func (d *DB) Ledgers(fn func(ledgerID int64) bool) error {
	if err := d.enter(); err != nil {
		return err
	}
	var ids []int64
	for _, s := range d.shards {
		ids = append(ids, s.ledgerIDs()...)
	}
	d.exit() // fn may call back into the storage
	slices.Sort(ids)
	for _, id := range ids {
		if !fn(id) {
			break
		}
	}
	return nil
}

// Flush implements Storage: every directory's write cache goes to its
// entry log and index (in parallel), then the checkpoint taken before is
// completed.
func (d *DB) Flush() error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.flushAll(false)
}

// flushAll flushes every shard and completes a checkpoint; background
// flushes are paced.
func (d *DB) flushAll(background bool) error {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	if err := d.fail.check(); err != nil {
		return err
	}
	var cp Checkpoint
	if d.opts.Checkpointer != nil {
		cp = d.opts.Checkpointer.StartCheckpoint() // before any swap: see the package doc
	}
	if err := d.eachShard(func(s *shard) error { return s.flush(true, background) }); err != nil {
		return err
	}
	if d.opts.Checkpointer == nil {
		return nil
	}
	d.opts.hook("checkpoint:before")
	if err := d.opts.Checkpointer.CompleteCheckpoint(cp); err != nil {
		return fmt.Errorf("entrylog: complete checkpoint: %w", err)
	}
	d.opts.hook("checkpoint:after")
	return nil
}

// eachShard runs fn on every directory, in parallel when there are several
// (they are separate disks), and joins the errors.
func (d *DB) eachShard(fn func(*shard) error) error {
	if len(d.shards) == 1 || d.opts.sequential {
		var errs []error
		for _, s := range d.shards {
			errs = append(errs, fn(s))
		}
		return errors.Join(errs...)
	}
	errs := make([]error, len(d.shards))
	var wg sync.WaitGroup
	for i, s := range d.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(s)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// GC removes the entry logs that hold no live record.
func (d *DB) GC(ctx context.Context) error { return d.Compact(ctx, 0) }

// Compact removes the entry logs that hold no live record and compacts
// those whose live fraction is below threshold: their live records are
// copied to the current log and the old log removed. Compact(ctx, 1)
// compacts every sealed log that holds any garbage.
//
// Close cancels a compaction in progress (between steps), so it never
// holds Close up for long.
func (d *DB) Compact(ctx context.Context, threshold float64) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	if err := d.fail.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.ctx, cancel)()
	return d.eachShard(func(s *shard) error { return s.collect(ctx, threshold) })
}

// Stats returns the gauges and counters of every directory, summed (all
// zero once the storage is closed).
func (d *DB) Stats() Stats {
	var st Stats
	if d.enter() != nil {
		return st
	}
	defer d.exit()
	for _, s := range d.shards {
		s.addTo(&st)
	}
	return st
}

// Close stops background work, flushes (completing a checkpoint) unless
// the storage failed, and closes every file. It returns the failure of a
// failed storage.
func (d *DB) Close() error {
	if !d.closing.CompareAndSwap(false, true) {
		return ErrClosed
	}
	for _, s := range d.shards {
		s.wc.closing.Store(true) // a paced flush under way finishes at full speed
	}
	d.cancel()
	close(d.stopLoops)
	d.loops.Wait()
	d.life.Lock()
	d.closed = true
	d.life.Unlock()
	err := d.fail.check()
	if err == nil {
		err = d.flushAll(false)
	}
	close(d.stopFlushers)
	d.flushers.Wait()
	for _, s := range d.shards {
		s.wc.stop(ErrClosed)
		err = errors.Join(err, s.close())
	}
	return err
}
