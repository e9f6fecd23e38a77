package entrylog

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are a DB's gauges and counters, summed over its directories, for
// export as Prometheus metrics. Counters only grow.
type Stats struct {
	Ledgers         int64 // gauge: ledgers with state
	WriteCacheBytes int64 // gauge: record bytes in the write caches
	ReadCacheBytes  int64 // gauge: bytes the read caches account for
	EntryLogs       int64 // gauge: entry-log files open

	WriteCacheHits    int64 // reads served by the write cache
	ReadCacheHits     int64
	ReadCacheMisses   int64
	EntryLogReads     int64 // reads of entry logs (each may read ahead)
	EntryLogReadBytes int64

	Flushes        int64 // write-cache halves written to an entry log
	FlushedEntries int64
	FlushedBytes   int64
	FlushTime      time.Duration // total time spent in those flushes
	ThrottledAdds  int64         // adds that waited for the write cache
	NoSpaceFlushes int64         // flushes and compactions that found the disk full

	LedgersDeleted   int64
	GCRuns           int64
	EntryLogsRemoved int64 // logs deleted by GC or after compaction
	ReclaimedBytes   int64 // their sizes
	Compactions      int64 // logs compacted
	CompactedBytes   int64 // record bytes copied by compaction
}

// counters are one directory's Stats counters.
type counters struct {
	writeCacheHits, logReads, logReadBytes                           atomic.Int64
	flushes, flushedEntries, flushedBytes, flushNanos                atomic.Int64
	throttledAdds, ledgersDeleted, noSpace                           atomic.Int64
	gcRuns, logsRemoved, reclaimedBytes, compactions, compactedBytes atomic.Int64
}

// addTo adds one directory's numbers to st.
func (s *shard) addTo(st *Stats) {
	c := s.stats
	st.Ledgers += int64(s.ledgerCount())
	st.WriteCacheBytes += s.wc.size()
	st.ReadCacheBytes += s.rc.size()
	st.EntryLogs += int64(s.logs.count())
	st.WriteCacheHits += c.writeCacheHits.Load()
	st.ReadCacheHits += s.rc.hits.Load()
	st.ReadCacheMisses += s.rc.misses.Load()
	st.EntryLogReads += c.logReads.Load()
	st.EntryLogReadBytes += c.logReadBytes.Load()
	st.Flushes += c.flushes.Load()
	st.FlushedEntries += c.flushedEntries.Load()
	st.FlushedBytes += c.flushedBytes.Load()
	st.FlushTime += time.Duration(c.flushNanos.Load())
	st.ThrottledAdds += c.throttledAdds.Load()
	st.NoSpaceFlushes += c.noSpace.Load()
	st.LedgersDeleted += c.ledgersDeleted.Load()
	st.GCRuns += c.gcRuns.Load()
	st.EntryLogsRemoved += c.logsRemoved.Load()
	st.ReclaimedBytes += c.reclaimedBytes.Load()
	st.Compactions += c.compactions.Load()
	st.CompactedBytes += c.compactedBytes.Load()
}

// failure is the fail-stop cell a DB's directories share: the first write
// or sync failure anywhere stops every change everywhere.
type failure struct {
	mu  sync.Mutex
	err atomic.Pointer[error]
}

// set records cause (the first one wins) and returns the error every later
// change gets: ErrFailed wrapping the first cause.
func (f *failure) set(cause error, log *slog.Logger) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.err.Load(); p != nil {
		return *p
	}
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	f.err.Store(&err)
	log.Error("ledger storage failed; every later change fails until it is reopened", "err", cause)
	return err
}

// check returns the failure, if any.
func (f *failure) check() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}
