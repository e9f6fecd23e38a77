package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/internal/invariants"
	"github.com/magnetar-io/magnetar/internal/stage"
)

// Errors. Failures wrap ErrFailed and the cause; test with errors.Is.
var (
	ErrClosed = errors.New("journal: closed")
	// ErrFailed: a write or datasync failed. Every add not yet
	// acknowledged failed with it, and every later add fails too: a failed
	// sync is never retried and assumed to have worked.
	ErrFailed = errors.New("journal: failed")
	// ErrEntryTooLarge rejects payloads over MaxEntrySize.
	ErrEntryTooLarge = errors.New("journal: entry too large")
	// ErrNoSpace: the disk is full (ENOSPC on a preallocation, a new file
	// or a write, or Options.Space refused to grow a file). The adds it
	// fails were never acknowledged and nothing written is lost: the
	// journal is not failed, and later adds try again.
	ErrNoSpace = errors.New("journal: out of space")
)

// SpaceFunc is asked before each preallocation in dir (a new file, or
// growing the current one) how many bytes to allocate: want is the
// configured step already capped to a fraction of the free space, need the
// least the next write requires (0 for a new file, which grows later). It
// returns at most want; fewer than need refuses (return an error wrapping
// ErrNoSpace to say why).
type SpaceFunc func(dir string, need, want int64) (int64, error)

// Options configure a journal. Zero values take BookKeeper's defaults
// (Pulsar's where it ships its own), under the same key names.
type Options struct {
	// Stages, when set, records the journal's stages of each add
	// (journal_queue, journal_write, journal_sync; internal/stage).
	Stages *stage.Recorder
	// MaxGroupWait is journalMaxGroupWaitMSec: the longest a group stays
	// open for more adds. The wait is adaptive (it lingers only while a
	// burst is still arriving). Default 0: never linger. Group commit needs
	// no wait to batch: adds that arrive during a datasync form the next
	// group; every lingering setting measured slower on this hardware,
	// closed- and open-loop (TUNING.md).
	MaxGroupWait time.Duration
	// BufferedWritesThreshold is journalBufferedWritesThreshold: a group
	// closes at this many bytes (default 512 KiB). Adds already queued
	// behind a full group form further groups written and datasynced with
	// it (up to 8 groups per datasync), as BookKeeper's force-write thread
	// syncs several buffered writes at once.
	BufferedWritesThreshold int
	// BufferedEntriesThreshold is journalBufferedEntriesThreshold: a group
	// closes at this many entries (default 0: no limit).
	BufferedEntriesThreshold int
	// MaxFileSize is journalMaxSizeMB: files rotate past it (default 2 GiB).
	MaxFileSize int64
	// PreallocSize is journalPreAllocSizeMB: files grow in chunks of
	// this size (default 16 MiB).
	PreallocSize int64
	// SkipSync is journalSyncData=false: acknowledge after the write, make
	// it durable every SyncInterval. Risks losing acknowledged entries on
	// a power failure or kernel crash (not on a process crash).
	SkipSync bool
	// SyncInterval is how often SkipSync journals datasync (default 1 s).
	SyncInterval time.Duration
	// NoFileReuse is journalReuseFiles=false: checkpointed files are
	// deleted instead of recycled (overwritten in place, up to
	// MaxRecycledFiles). Reuse is the default because it measured faster:
	// overwriting allocated blocks beats appending, and deleting a large
	// file on a discard-mounted ext4 stalled datasyncs for 50 ms (TUNING.md).
	NoFileReuse bool
	// MaxRecycledFiles bounds the recycled pool (default 2).
	MaxRecycledFiles int
	// BufferedWrites is journalDirectWrites=false: write through the page
	// cache. By default a journal file's writes bypass it (O_DIRECT; groups
	// are block-aligned already), which measured 0.45 cores less per
	// 100 MiB/s on this project's benchmark VM and never builds writeback
	// in front of the datasync (TUNING.md). A file system without direct
	// I/O falls back to buffered writes, said once in the log.
	BufferedWrites bool
	// Pipeline overlaps writing the next group with the previous group's
	// datasync (BookKeeper's separate force-write thread).
	Pipeline bool
	// ZeroFill is journalZeroFill: while the recycled pool is empty, a
	// goroutine prepares a spare file for it, up to 128 MiB of zeros
	// written at a bounded pace and synced, and the writer moves to a
	// pooled file as soon as its next group would leave the current
	// file's written blocks. Its groups' datasyncs then commit no extent
	// conversion (spare.go; TUNING.md). Needs reuse and direct writes.
	ZeroFill bool
	// ZeroFillRate is journalZeroFillRateMB: the spare's fill in bytes per
	// second (default 32 MiB/s). Its writes share the device with the
	// groups' flushes: 128 MiB/s on this project's VM disk tripled the
	// publish p99.9 (TUNING.md).
	ZeroFillRate int64
	// QueueSize is journalQueueSize: adds waiting for the writer; Add
	// blocks when it is full (default 10000).
	QueueSize int
	// Space, when set, decides each preallocation (the bookie checks disk
	// usage there, so its threshold, not ENOSPC, is met first).
	Space SpaceFunc
	// Logger receives one line per event an operator acts on.
	Logger *slog.Logger
}

// WithDefaults returns o with every unset option at its default.
func (o Options) WithDefaults() Options { return o.withDefaults() }

func (o Options) withDefaults() Options {
	if o.BufferedWritesThreshold <= 0 {
		o.BufferedWritesThreshold = 512 << 10
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = 2 << 30
	}
	if o.PreallocSize <= 0 {
		o.PreallocSize = 16 << 20
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = time.Second
	}
	if o.MaxRecycledFiles <= 0 {
		o.MaxRecycledFiles = 2
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 10000
	}
	if o.ZeroFillRate <= 0 {
		o.ZeroFillRate = 32 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Callback receives an add's outcome: the mark of its group once durable,
// or an error. Callbacks run on the journal's goroutine in add order and
// must not block.
type Callback func(Mark, error)

type request struct {
	ledgerID, entryID int64
	payload           []byte
	sum               crc32c.Known
	cb                Callback
	enqueued          time.Time
}

// segment is one open journal file.
type segment struct {
	id        uint64
	f         engine.File
	offset    int64 // next group's offset (writer only)
	allocated int64 // preallocated up to here (writer only)
	written   int64 // bytes below this were written when it was opened
}

// Journal is one journal directory and its writer.
//
// Lock rules: gate is held shared by Add while it enqueues and exclusively
// by Close to stop new adds, so no add is enqueued after the writer's final
// drain. mu guards failed, lastMark, recycled, live and nextID (the writer
// and the spare filler both take file ids). filesMu serialises
// file creation, renames and removals between the writer (rotation) and
// Checkpoint; it is never taken under mu.
type Journal struct {
	fs   engine.FS
	dir  string
	opts Options
	log  *slog.Logger

	queue chan *request
	quit  chan struct{}
	done  chan struct{}
	syncq chan syncItem // pipeline mode: written groups waiting for datasync
	spare *spareFiller  // Options.ZeroFill; nil when off

	gate   sync.RWMutex
	closed bool

	filesMu      sync.Mutex
	checkpointed Mark // guarded by filesMu

	mu       sync.Mutex
	failed   error
	noSpace  time.Time // when out of space was last logged (rate limit)
	lastMark Mark
	recycled []uint64 // recycled file ids, oldest first
	live     []uint64 // journal files in id order (the current one last)
	curID    uint64   // the current file's id (the writer's j.cur.id)

	// buffered is set once a file system refused direct writes (or
	// Options.BufferedWrites): later files do not try again. Guarded by
	// filesMu.
	buffered bool

	// writer-owned state
	cur      *segment
	nextID   uint64 // guarded by mu once the journal is open (takeID)
	seq      uint64
	groups   []group       // the groups of the commit being collected (reused)
	hdrs     []byte        // group and record headers of the groups being written
	iov      [][]byte      // its buffers: headers, payloads, padding
	arrival  time.Duration // EWMA of the gap between adds
	lastAdd  time.Time
	lastSync time.Time
	timer    *time.Timer
}

// Open opens (creating if needed) the journal in dir, replays every entry
// after the last checkpoint through replay (in journal order), truncates a
// torn tail, starts a new file and starts the writer.
func Open(fs engine.FS, dir string, opts Options, replay func(Entry) error) (*Journal, error) {
	opts = opts.withDefaults()
	j := &Journal{fs: fs, dir: dir, opts: opts, log: opts.Logger.With("journal", dir), buffered: opts.BufferedWrites,
		queue: make(chan *request, opts.QueueSize), quit: make(chan struct{}), done: make(chan struct{})}
	// The directory's own entry must be durable too, or a crash right
	// after the first acknowledged add could lose the whole journal.
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal %s: %w", dir, err)
	}
	if err := fs.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, fmt.Errorf("journal %s: sync parent directory: %w", dir, err)
	}
	if err := j.recover(replay); err != nil {
		return nil, err
	}
	if err := j.rotate(); err != nil {
		return nil, err
	}
	if opts.ZeroFill && !opts.NoFileReuse {
		j.startSpareFiller()
	}
	j.timer = time.NewTimer(time.Hour)
	j.timer.Stop()
	if opts.Pipeline && !opts.SkipSync {
		j.syncq = make(chan syncItem, 256)
		syncDone := make(chan struct{})
		go j.syncLoop(syncDone)
		go func() { j.writeLoop(); close(j.syncq); <-syncDone; close(j.done) }()
	} else {
		go func() { j.writeLoop(); close(j.done) }()
	}
	return j, nil
}

// Add queues an entry; cb runs once it is durable (or failed). Add blocks
// while the queue is full. The payload must not change until cb runs.
func (j *Journal) Add(ledgerID, entryID int64, payload []byte, cb Callback) error {
	return j.add(&request{ledgerID: ledgerID, entryID: entryID, payload: payload, cb: cb})
}

// AddSummed is Add with the payload's CRC32C if the caller has it, so the
// record's checksum need not read the payload again. It must be the
// payload's: a wrong one writes a record that replay rejects as torn.
func (j *Journal) AddSummed(ledgerID, entryID int64, payload []byte, sum crc32c.Known, cb Callback) error {
	if invariants.Enabled && !sum.Matches(payload) {
		invariants.Failf("journal: AddSummed of ledger %d entry %d with CRC %08x, not the payload's", ledgerID, entryID, sum.CRC)
	}
	return j.add(&request{ledgerID: ledgerID, entryID: entryID, payload: payload, sum: sum, cb: cb})
}

func (j *Journal) add(r *request) error {
	payload := r.payload
	if len(payload) > MaxEntrySize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(payload), MaxEntrySize)
	}
	j.gate.RLock()
	defer j.gate.RUnlock()
	if j.closed {
		return ErrClosed
	}
	if err := j.failure(); err != nil {
		return err
	}
	r.enqueued = time.Now()
	j.queue <- r
	return nil
}

// LastMark is the mark after the last acknowledged group.
func (j *Journal) LastMark() Mark {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastMark
}

func (j *Journal) failure() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// fail puts the journal into the failed state (once) and returns the error
// every pending add gets. A full disk met before anything was acknowledged
// is not a failure: the adds fail with ErrNoSpace and the journal goes on.
func (j *Journal) fail(cause error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed == nil && outOfSpace(cause) {
		return j.noSpaceLocked(cause)
	}
	if j.failed == nil {
		j.failed = fmt.Errorf("%w: %s: %w", ErrFailed, j.dir, cause)
		j.log.Error("journal failed; every pending and later add fails until restart", "err", cause)
	}
	return j.failed
}

// Close writes what is queued, waits for it to be durable, and closes.
func (j *Journal) Close() error {
	j.gate.Lock()
	if j.closed {
		j.gate.Unlock()
		return ErrClosed
	}
	j.closed = true
	j.gate.Unlock()
	close(j.quit)
	<-j.done
	j.stopSpareFiller()
	var err error
	if j.cur != nil {
		if j.failure() == nil {
			err = j.cur.f.Datasync()
		}
		err = errors.Join(err, j.cur.f.Close())
	}
	if err != nil {
		return fmt.Errorf("journal %s: close: %w", j.dir, err)
	}
	return j.failure()
}

// outOfSpace reports whether err is a full disk that lost nothing written:
// a refused or failed preallocation, file creation or write (never a
// datasync, which stays a failure).
func outOfSpace(err error) bool {
	return errors.Is(err, ErrNoSpace) || engine.IsNoSpaceOnWrite(err)
}

// noSpaceLocked returns the error the adds of a group that found no space
// get, logging it at most every 10 s. Caller holds mu.
func (j *Journal) noSpaceLocked(cause error) error {
	if time.Since(j.noSpace) > 10*time.Second {
		j.noSpace = time.Now()
		j.log.Warn("journal out of space; adds fail until space is freed", "err", cause)
	}
	if errors.Is(cause, ErrNoSpace) {
		return cause
	}
	return fmt.Errorf("%w: %s: %w", ErrNoSpace, j.dir, cause)
}
