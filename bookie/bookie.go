package bookie

import (
	"github.com/magnetar-io/magnetar/internal/stage"

	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
)

// Meta record entry ids in the journal (see the package doc).
const (
	metaMasterKey   int64 = -0x1000
	metaFence       int64 = -0x2000
	metaForce       int64 = -0x4000
	metaExplicitLAC int64 = -0x8000
)

// numStripes is the number of stripe locks adds and fences of ledgers
// share; enough that unrelated ledgers rarely wait for each other.
const numStripes = 64

// Options configure a Bookie core. Zero values take the defaults.
type Options struct {
	// FlushInterval is how often ledger storage is flushed and the journal
	// checkpointed (BookKeeper flushInterval; default 10 s). Storage also
	// flushes on its own when its write cache fills.
	FlushInterval time.Duration
	// LedgerDirs are checked for free space (ledgerDirectories).
	LedgerDirs []string
	// DiskUsageThreshold: a journal or ledger directory fuller than this
	// makes the bookie read-only (diskUsageThreshold; default 0.95). The
	// space above it is a reserve for what the bookie must still write
	// (storage flushes of journaled entries, checkpoints, the index).
	DiskUsageThreshold float64
	// DiskUsageWarnThreshold: a directory fuller than this is logged
	// (diskUsageWarnThreshold; default 0.90).
	DiskUsageWarnThreshold float64
	// DiskUsageLwmThreshold: writable again once every directory is below
	// this (diskUsageLwmThreshold; default 0.90).
	DiskUsageLwmThreshold float64
	// DiskCheckInterval (diskCheckInterval; default 10 s). The disks are
	// also checked before each journal and entry-log preallocation.
	DiskCheckInterval time.Duration
	// DiskUsage measures a directory (default StatfsUsage).
	DiskUsage DiskUsageFunc
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Metrics, when set, records journal latencies.
	Metrics *Metrics
	// Stages, when set, records each add's time in the bookie
	// (bookie_add; internal/stage).
	Stages *stage.Recorder
}

func (o Options) withDefaults() Options {
	if o.FlushInterval <= 0 {
		o.FlushInterval = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DiskUsageThreshold <= 0 {
		o.DiskUsageThreshold = 0.95
	}
	if o.DiskUsageLwmThreshold <= 0 {
		o.DiskUsageLwmThreshold = 0.90
	}
	if o.DiskUsageWarnThreshold <= 0 {
		o.DiskUsageWarnThreshold = 0.90
	}
	if o.DiskCheckInterval <= 0 {
		o.DiskCheckInterval = 10 * time.Second
	}
	if o.DiskUsage == nil {
		o.DiskUsage = StatfsUsage
	}
	return o
}

// OpenStorage opens the ledger storage; the Checkpointer it gets ties
// storage flushes to the journal. Core calls it before it opens the
// journal, so journal replay lands in the storage it returns.
type OpenStorage func(cp entrylog.Checkpointer) (entrylog.Storage, error)

// Core is the bookie without its network: the request handlers, storage,
// journal, fencing and LAC tracking. Server puts it on netio.
type Core struct {
	opts    Options
	log     *slog.Logger
	storage entrylog.Storage
	journal atomic.Pointer[journal.Set]
	lacs    lacTracker
	stripes [numStripes]sync.Mutex

	// ledgers caches each ledger's master key and fenced flag so that an
	// add costs no storage lookup. Guarded by the ledger's stripe lock
	// (one map per stripe).
	ledgers [numStripes]map[int64]*ledgerState

	journalDirs  []string
	diskMu       sync.Mutex      // serialises disk checks and their mode changes
	diskWarned   map[string]bool // directories above the warn threshold; guarded by diskMu
	readOnly     atomic.Bool     // writesFailed || diskFull
	writesFailed atomic.Bool     // ledger storage or journal failed: for good, until restarted
	storageWhy   atomic.Value    // string: why writesFailed
	diskWhy      atomic.Value    // string
	modeListener atomic.Pointer[func(readOnly bool)]
	shuttingDown atomic.Bool // refuses new requests
	disk         atomic.Pointer[diskState]
	diskFull     atomic.Bool // read-only because a disk is full (out of space), not a failure
	diskDone     chan struct{}
	stop         chan struct{} // closed by Close
	flusherDone  chan struct{}
	closeOnce    sync.Once
}

type ledgerState struct {
	masterKey []byte
	fenced    bool
}

// OpenCore opens ledger storage, replays the journals in journalDirs into
// it, checkpoints, and starts the periodic flush and disk check. Both the
// journal's and the storage's preallocations ask the disk check first
// (jopts.Space and the Checkpointer's Space, unless set).
func OpenCore(fs engine.FS, journalDirs []string, jopts journal.Options, open OpenStorage, opts Options) (*Core, error) {
	opts = opts.withDefaults()
	if opts.DiskUsageLwmThreshold > opts.DiskUsageThreshold || opts.DiskUsageWarnThreshold > opts.DiskUsageThreshold {
		return nil, fmt.Errorf("bookie: diskUsageLwmThreshold %.2f and diskUsageWarnThreshold %.2f must not be above diskUsageThreshold %.2f",
			opts.DiskUsageLwmThreshold, opts.DiskUsageWarnThreshold, opts.DiskUsageThreshold)
	}
	c := &Core{opts: opts, log: opts.Logger, journalDirs: journalDirs, diskWarned: map[string]bool{},
		stop: make(chan struct{}), flusherDone: make(chan struct{}), diskDone: make(chan struct{})}
	c.lacs.init()
	for i := range c.ledgers {
		c.ledgers[i] = make(map[int64]*ledgerState)
	}
	c.checkDisks()
	st, err := open(checkpointer{c})
	if err != nil {
		return nil, fmt.Errorf("bookie: open ledger storage: %w", err)
	}
	c.storage = st
	if jopts.Space == nil {
		jopts.Space = c.journalSpace
	}
	if err := c.openJournal(fs, journalDirs, jopts); err != nil {
		st.Close()
		return nil, err
	}
	c.checkDisks()
	go c.flushLoop()
	go c.diskLoop()
	return c, nil
}

// openJournal replays the journals into storage and flushes it. A flush
// that finds the disk full leaves the bookie read-only (out of space) with
// the replayed entries in the write cache, readable, and the journal not
// checkpointed past them: the flush loop retries once space is freed. A
// replay the storage cannot take says how much it had replayed and how
// much space the ledger directories have.
func (c *Core) openJournal(fs engine.FS, journalDirs []string, jopts journal.Options) error {
	replayed, bytes := 0, 0
	js, err := journal.OpenSet(fs, journalDirs, jopts, func(e journal.Entry) error {
		replayed++
		bytes += len(e.Payload)
		return c.replay(e)
	})
	if err != nil {
		if isNoSpace(err) || errors.Is(err, entrylog.ErrWriteCacheFull) {
			free, _ := c.measureSpace()
			return fmt.Errorf("bookie: replaying the journal needs space: %d records (%d bytes) replayed when it stopped; "+
				"the ledger directories have %d bytes free and need at least the journal's size after its checkpoint: %w",
				replayed, bytes, free, err)
		}
		return fmt.Errorf("bookie: open journal: %w", err)
	}
	c.journal.Store(js)
	if err := c.storage.Flush(); err != nil {
		if !isNoSpace(err) {
			js.Close()
			return fmt.Errorf("bookie: flush after replaying %d journal records: %w", replayed, err)
		}
		c.noSpace("flush after replaying the journal", err)
		c.log.Warn("bookie starts read-only: the replayed journal does not fit on the ledger disks yet",
			"records", replayed, "bytes", bytes, "err", err)
	}
	if replayed > 0 {
		c.log.Info("bookie replayed journal", "records", replayed, "bytes", bytes, "journal_dirs", journalDirs)
	}
	return nil
}

// measureSpace returns the ledger directories' free and total bytes now.
func (c *Core) measureSpace() (free, total uint64) {
	st := c.measure()
	return st.free, st.total
}

// replay applies one journal record to storage.
func (c *Core) replay(e journal.Entry) error {
	var err error
	switch {
	case e.EntryID >= 0:
		err = c.storage.AddEntry(e.LedgerID, e.EntryID, e.Payload)
		if err == nil {
			c.noteEntryLAC(e.LedgerID, e.Payload)
		}
	case e.EntryID == metaMasterKey:
		err = c.storage.SetMasterKey(e.LedgerID, e.Payload)
	case e.EntryID == metaFence:
		_, err = c.storage.SetFenced(e.LedgerID)
	case e.EntryID == metaExplicitLAC:
		err = c.storage.SetExplicitLAC(e.LedgerID, e.Payload)
	case e.EntryID == metaForce:
	default:
		return fmt.Errorf("journal record for ledger %d has unknown meta entry id %d", e.LedgerID, e.EntryID)
	}
	// A ledger deleted after its records were journaled has no state to
	// change: its records are dropped, never resurrected.
	if errors.Is(err, entrylog.ErrNoLedger) {
		return nil
	}
	return err
}

// checkpointer implements entrylog.Checkpointer over the journal set.
type checkpointer struct{ c *Core }

func (cp checkpointer) StartCheckpoint() entrylog.Checkpoint {
	js := cp.c.journal.Load()
	if js == nil {
		return nil // still replaying: nothing may be trimmed yet
	}
	return js.LastMarks()
}

// Space makes the storage's preallocations check the bookie's disks
// (entrylog.Spacer).
func (cp checkpointer) Space(dir string, need, want int64) (int64, error) {
	return cp.c.storageSpace(dir, need, want)
}

func (cp checkpointer) CompleteCheckpoint(m entrylog.Checkpoint) error {
	marks, ok := m.([]journal.Mark)
	js := cp.c.journal.Load()
	if !ok || js == nil {
		return nil
	}
	return js.Checkpoint(marks)
}

func (c *Core) flushLoop() {
	defer close(c.flusherDone)
	t := time.NewTicker(c.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if err := c.storage.Flush(); err != nil {
				c.noteFlushError(err)
			}
		}
	}
}

// noteFlushError handles a failed flush: a full disk (the entry log, or
// the journal's checkpoint) makes the bookie read-only until space is
// freed, and the next flush tries again; anything else fails storage.
func (c *Core) noteFlushError(err error) {
	if isNoSpace(err) {
		c.noSpace("ledger storage flush", err)
		return
	}
	c.failStorage(err)
}

// failStorage turns the bookie read-only after a storage failure for
// good: reads may still work, writes cannot be stored.
func (c *Core) failStorage(err error) { c.failWrites("ledger storage", err) }

// failJournal turns the bookie read-only after its journal failed: no add
// can be made durable again (a failed sync is final, the journal fails
// every later add), so it must register read-only for clients to stop
// choosing it rather than fail every add they send.
func (c *Core) failJournal(err error) { c.failWrites("journal", err) }

// failWrites turns the bookie read-only for good (once), telling the mode
// listener, which updates the registration.
func (c *Core) failWrites(what string, err error) {
	if !c.writesFailed.Swap(true) {
		c.storageWhy.Store(what + " failed: " + err.Error())
		c.log.Error("bookie "+what+" failed; read-only until restarted", "err", err)
		c.updateMode()
	}
}

// updateMode sets read-only mode from its two causes.
func (c *Core) updateMode() {
	ro := c.writesFailed.Load() || c.diskFull.Load()
	if c.readOnly.Swap(ro) != ro {
		why, _ := c.storageWhy.Load().(string)
		if why == "" {
			why, _ = c.diskWhy.Load().(string)
		}
		if !ro {
			why = "writable"
		}
		c.log.Warn("bookie mode changed", "read_only", ro, "why", why)
		if fn := c.modeListener.Load(); fn != nil {
			(*fn)(ro)
		}
	}
}

// OnModeChange sets a function called (on the goroutine that changed it)
// whenever read-only mode changes.
func (c *Core) OnModeChange(fn func(readOnly bool)) { c.modeListener.Store(&fn) }

// OutOfSpace reports whether the bookie is read-only because a disk is
// full (a state it leaves by itself once below the low-water mark), not
// because its storage failed.
func (c *Core) OutOfSpace() bool {
	return c.readOnly.Load() && !c.writesFailed.Load() && c.diskFull.Load()
}

// ReadOnly reports whether the bookie refuses adds, and why. While it is
// out of space the reason starts with OutOfSpaceReason.
func (c *Core) ReadOnly() (bool, string) {
	if !c.readOnly.Load() {
		return false, ""
	}
	if why, _ := c.storageWhy.Load().(string); why != "" {
		return true, why
	}
	why, _ := c.diskWhy.Load().(string)
	return true, why
}

// Storage is the ledger storage (for the shell and metrics).
func (c *Core) Storage() entrylog.Storage { return c.storage }

// Close stops the flusher, answers waiting long polls, flushes storage
// (checkpointing the journal), closes the journal (answering adds still
// queued: they are replayed on the next start) and closes storage.
func (c *Core) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.shuttingDown.Store(true)
		close(c.stop)
		<-c.flusherDone
		<-c.diskDone
		c.lacs.closeAll()
		if ferr := c.storage.Flush(); ferr != nil {
			err = fmt.Errorf("bookie: flush on close: %w", ferr)
		}
		if js := c.journal.Swap(nil); js != nil {
			if jerr := js.Close(); jerr != nil && err == nil {
				err = fmt.Errorf("bookie: close journal: %w", jerr)
			}
		}
		if serr := c.storage.Close(); serr != nil && err == nil {
			err = fmt.Errorf("bookie: close ledger storage: %w", serr)
		}
	})
	return err
}

func (c *Core) stripe(ledgerID int64) int { return int(uint64(ledgerID) % numStripes) }
