package entrylog

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// Default cache sizes (dbStorage_writeCacheMaxSizeMb and
// dbStorage_readAheadCacheMaxSizeMb).
const (
	DefaultWriteCacheMaxSize = 64 << 20
	DefaultReadCacheMaxSize  = 64 << 20
)

// DefaultFlushRate is FlushRate's default (dbStorage_flushRateMbPerSec).
const DefaultFlushRate = 256 << 20

// Options configure a DB. Zero values take the defaults BookKeeper's
// DbLedgerStorage uses, under the configuration keys named. Sizes are for
// the whole DB; each ledger directory gets an equal share, as in
// BookKeeper.
type Options struct {
	// LogSizeLimit is logSizeLimit: an entry log is sealed and a new one
	// started before it would pass this size (default 1 GiB).
	LogSizeLimit int64
	// PreallocSize: entry logs grow in preallocated steps of this size
	// (default 64 MiB, at most LogSizeLimit), each at most an eighth of
	// the free space, so a small disk starts and a full one is met at a
	// preallocation, not in the middle of a write.
	PreallocSize int64
	// Space, when set, decides each preallocation (see SpaceFunc). When
	// nil and the Checkpointer is a Spacer (the bookie's), its Space is
	// used: so every storage a bookie opens checks the bookie's disks.
	Space SpaceFunc
	// WriteCacheMaxSize is dbStorage_writeCacheMaxSizeMb (default 64 MiB).
	// Half of each directory's share fills before a flush is started.
	WriteCacheMaxSize int64
	// ReadCacheMaxSize is dbStorage_readAheadCacheMaxSizeMb (default
	// 64 MiB; negative: no read cache).
	ReadCacheMaxSize int64
	// ReadAheadBatchSize is dbStorage_readAheadCacheBatchSize: entries read
	// with one read on a cache miss (default 100; 1 disables read-ahead).
	ReadAheadBatchSize int
	// ReadAheadMaxBytes is dbStorage_readAheadCacheBatchBytesSize: the most
	// bytes one read-ahead read spans (default 1 MiB).
	ReadAheadMaxBytes int64
	// FlushInterval: the write cache is flushed (and a checkpoint
	// completed) at least this often (default 1 s; negative: only on
	// Flush and when a cache half fills).
	FlushInterval time.Duration
	// FlushRate is dbStorage_flushRateMbPerSec, in bytes a second: how
	// fast a background flush or compaction writes into the entry log
	// while the write cache has room (default 256 MiB/s; negative: as fast
	// as the disk takes it). A flush written all at once puts tens of
	// megabytes in the device's queue, and every journal datasync on the
	// same device waits behind them (TUNING.md: 40 ms journal p99 unpaced,
	// 4 ms paced, on this machine's disk). The pace never holds back
	// ingest: once the active half is half full, or an add waits for
	// room, the flush goes at full speed.
	FlushRate int64
	// BufferedWrites is dbStorage_directIOEntryLogger=false: write entry
	// logs through the page cache. By default a log's writes bypass it
	// (O_DIRECT): each write into a log is cut at a 4 KiB boundary, the
	// last partial block carried to the next write, and every flush ends
	// padded to a block (doc.go). Bytes the bookie never reads back soon
	// (its write and read caches, and the broker's cache, serve recent
	// reads) then cost no page-cache copy and build no writeback burst in
	// front of the journal's datasyncs (TUNING.md). Reads still go through
	// the page cache. A file system without direct I/O falls back to
	// buffered writes, said once in the log.
	BufferedWrites bool
	// MaxThrottleTime is dbStorage_maxThrottleTimeMs: how long AddEntry
	// waits for a full write cache before it fails with ErrWriteCacheFull
	// (default 10 s).
	MaxThrottleTime time.Duration
	// GCWaitTime is gcWaitTime: how often garbage collection runs
	// (default 15 min; negative: only when GC or Compact is called).
	GCWaitTime time.Duration
	// MinorCompactionThreshold is minorCompactionThreshold: logs with less
	// than this fraction live are compacted by minor compaction (default
	// 0.2; negative disables).
	MinorCompactionThreshold float64
	// MinorCompactionInterval is minorCompactionInterval (default 1 h).
	MinorCompactionInterval time.Duration
	// MajorCompactionThreshold is majorCompactionThreshold (default 0.5;
	// negative disables).
	MajorCompactionThreshold float64
	// MajorCompactionInterval is majorCompactionInterval (default 24 h).
	MajorCompactionInterval time.Duration

	// IndexFS holds the Pebble indexes. Default: the operating system's
	// file system, or an in-memory one when the entry logs' FS is the mem
	// backend. Tests pass vfs.NewCrashableMem() to crash both together.
	IndexFS vfs.FS
	// IndexCacheSize is Pebble's block cache per directory
	// (dbStorage_rocksDB_blockCacheSize; default 16 MiB).
	IndexCacheSize int64
	// IndexMemTableSize is Pebble's memtable size per directory
	// (dbStorage_rocksDB_writeBufferSizeMB; default 16 MiB).
	IndexMemTableSize int64

	// Checkpointer is told when a flush made everything before a journal
	// position durable (nil: nobody is told).
	Checkpointer Checkpointer
	// Logger receives one line per event an operator acts on.
	Logger *slog.Logger

	// hook, when set (tests), is called at named points on the durability
	// boundaries ("flush:log-synced", "delete:committed", ...).
	hook func(point string)
	// sequential, when set (tests), makes flushes and compactions visit the
	// directories one after the other, so a seeded run is reproducible.
	sequential bool
	// commitChunk, when set (tests), replaces the const commitChunk, so
	// small flushes commit their index in several batches.
	commitChunk int
}

func (o Options) withDefaults(fs engine.FS) Options {
	setDefault(&o.LogSizeLimit, 1<<30)
	setDefault(&o.PreallocSize, 64<<20)
	o.PreallocSize = min(o.PreallocSize, o.LogSizeLimit)
	setDefault(&o.WriteCacheMaxSize, DefaultWriteCacheMaxSize)
	setDefault(&o.ReadCacheMaxSize, DefaultReadCacheMaxSize)
	setDefault(&o.ReadAheadBatchSize, 100)
	setDefault(&o.ReadAheadMaxBytes, 1<<20)
	setDefault(&o.FlushInterval, time.Second)
	setDefault(&o.FlushRate, DefaultFlushRate)
	setDefault(&o.MaxThrottleTime, 10*time.Second)
	setDefault(&o.GCWaitTime, 15*time.Minute)
	setDefault(&o.MinorCompactionThreshold, 0.2)
	setDefault(&o.MinorCompactionInterval, time.Hour)
	setDefault(&o.MajorCompactionThreshold, 0.5)
	setDefault(&o.MajorCompactionInterval, 24*time.Hour)
	setDefault(&o.IndexCacheSize, 16<<20)
	setDefault(&o.IndexMemTableSize, 16<<20)
	setDefault(&o.commitChunk, commitChunk)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if sp, ok := o.Checkpointer.(Spacer); ok && o.Space == nil {
		o.Space = sp.Space
	}
	if o.IndexFS == nil {
		o.IndexFS = vfs.Default
		if isMem(fs) {
			o.IndexFS = vfs.NewMem()
		}
	}
	if o.hook == nil {
		o.hook = func(string) {}
	}
	return o
}

func setDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

func (o Options) validate() error {
	switch {
	case o.LogSizeLimit < 2*LogHeaderSize:
		return fmt.Errorf("entrylog: LogSizeLimit %d is below %d", o.LogSizeLimit, 2*LogHeaderSize)
	case o.WriteCacheMaxSize < 0:
		return fmt.Errorf("entrylog: negative WriteCacheMaxSize")
	case o.ReadAheadBatchSize < 0 || o.ReadAheadMaxBytes < 0:
		return fmt.Errorf("entrylog: negative read-ahead")
	case o.MaxThrottleTime < 0:
		return fmt.Errorf("entrylog: negative MaxThrottleTime")
	}
	return nil
}

// perDirectory returns the options one of n directories gets.
func (o Options) perDirectory(n int) *Options {
	d := o
	d.WriteCacheMaxSize = max(o.WriteCacheMaxSize/int64(n), 2*(RecordHeaderSize+1))
	d.ReadCacheMaxSize = max(o.ReadCacheMaxSize/int64(n), 0)
	return &d
}

// isMem reports whether fs is (a wrapper around) the mem backend.
func isMem(fs engine.FS) bool {
	for {
		switch v := fs.(type) {
		case *engine.MemFS:
			return true
		case interface{ Unwrap() engine.FS }:
			fs = v.Unwrap()
		default:
			return false
		}
	}
}
