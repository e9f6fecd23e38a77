package entrylog

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/engine"
)

// shard is the storage of one ledger directory: its entry logs, its index,
// its caches. The DB routes each ledger to one shard.
//
// Lock rules (a lock may be taken while holding those above it, never the
// other way):
//
//	gcMu      one garbage collection or compaction at a time
//	writeMu   held from writing records into the entry log until their index
//	          commit (flush, compaction batch), and while GC picks sealed
//	          logs; so a log GC sees sealed has no commit still to come
//	indexMu   serialises the index commits that depend on ledger state
//	          (flush, compaction's compare-and-set, DeleteLedger, GC's
//	          liveness check and metadata removal); guards logUsage
//	mu        ledger states; held only for map work, the unsynced Pebble
//	          writes of state changes and, when a ledger is first seen, the
//	          Pebble read of its tombstone (never a sync)
//	leaves    writeCache.mu, readCache.mu, logSet.mu: nothing is taken
//	          under them
type shard struct {
	dir   string
	fs    engine.FS
	opts  *Options
	log   *slog.Logger
	fail  *failure
	stats *counters
	hook  func(string)

	ix   *index
	logs *logSet
	wc   *writeCache
	rc   *readCache

	noSpaceLogged atomic.Int64 // unix nanos of the last out-of-space warning

	gcMu    sync.Mutex
	writeMu sync.Mutex
	indexMu sync.Mutex
	// logUsage: per sealed or current log, the bytes of committed records
	// per ledger. Guarded by indexMu.
	logUsage map[uint64]map[int64]int64

	mu struct {
		sync.Mutex
		ledgers  map[int64]*ledgerState
		deleting map[int64]struct{} // DeleteLedger between state removal and tombstone commit
		dirty    bool               // a state change not yet covered by a synced commit
	}
}

// openShard opens (or initialises) the storage in dir.
func openShard(fs engine.FS, dir string, opts *Options, fail *failure, stats *counters) (*shard, error) {
	s := &shard{dir: dir, fs: fs, opts: opts, log: opts.Logger.With("dir", dir), fail: fail, stats: stats,
		hook: opts.hook, logUsage: make(map[uint64]map[int64]int64)}
	s.mu.ledgers = make(map[int64]*ledgerState)
	s.mu.deleting = make(map[int64]struct{})
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("entrylog %s: %w", dir, err)
	}
	if err := fs.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, fmt.Errorf("entrylog %s: sync parent directory: %w", dir, err)
	}
	ix, err := openIndex(filepath.Join(dir, indexDirName), indexOptions{fs: opts.IndexFS,
		cacheSize: opts.IndexCacheSize, memTableSize: opts.IndexMemTableSize, log: opts.Logger})
	if err != nil {
		return nil, err
	}
	s.ix = ix
	s.logs = newLogSet(fs, dir, opts, s.log)
	if err := s.load(); err != nil {
		return nil, errors.Join(err, s.logs.closeAll(), ix.close())
	}
	s.wc = newWriteCache(opts.WriteCacheMaxSize, opts.MaxThrottleTime)
	s.rc = newReadCache(opts.ReadCacheMaxSize)
	return s, nil
}

// load reads ledger states and log usage, opens the entry logs and starts a
// new one. Nothing else runs yet, so it takes no locks.
func (s *shard) load() error {
	if err := s.loadStates(); err != nil {
		return err
	}
	if err := s.loadUsage(); err != nil {
		return err
	}
	if err := s.openLogs(); err != nil {
		return err
	}
	return s.logs.startNew()
}

func (s *shard) loadStates() error {
	lower, upper := []byte{prefixLedger}, []byte{prefixLedger + 1}
	return s.ix.scan(lower, upper, func(k, v []byte) (bool, error) {
		id, ok := decodeLedgerKey(prefixLedger, k)
		if !ok {
			return false, corruptKey(s.ix.dir, k, "not a ledger-state key")
		}
		st, reason := decodeState(v)
		if reason != "" {
			return false, corruptKey(s.ix.dir, k, "%s", reason)
		}
		s.mu.ledgers[id] = st
		return true, nil
	})
}

func (s *shard) loadUsage() error {
	lower, upper := []byte{prefixLogMeta}, []byte{prefixLogMeta + 1}
	return s.ix.scan(lower, upper, func(k, v []byte) (bool, error) {
		logID, ledgerID, ok := decodeLogMetaKey(k)
		if !ok || len(v) != 8 {
			return false, corruptKey(s.ix.dir, k, "bad log-usage key or value (%d bytes)", len(v))
		}
		u := s.logUsage[logID]
		if u == nil {
			u = make(map[int64]int64)
			s.logUsage[logID] = u
		}
		u[ledgerID] = int64(decodeUint64(v))
		return true, nil
	})
}

// openLogs opens every entry log the index uses and checks it; logs the
// index does not use hold only records whose commit never happened (a crash
// between writing and committing) and are removed.
func (s *shard) openLogs() error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("entrylog %s: list: %w", s.dir, err)
	}
	found := map[uint64]bool{}
	for _, name := range names {
		id, ok := parseLogFileName(name)
		if !ok {
			continue
		}
		found[id] = true
		s.logs.nextID = max(s.logs.nextID, id+1)
		if err := s.openLog(id); err != nil {
			return err
		}
	}
	for id := range s.logUsage {
		s.logs.nextID = max(s.logs.nextID, id+1)
		if !found[id] {
			return engine.CorruptionErrorf("entrylog %s: the index uses entry log %s, which is missing",
				s.dir, logFileName(id))
		}
	}
	return nil
}

func (s *shard) openLog(id uint64) error {
	usage, used := s.logUsage[id]
	if !used {
		s.log.Info("removing entry log no index entry uses (written before a crash, never committed)",
			"log", logFileName(id))
		p := s.logs.path(id)
		if err := s.fs.Remove(p); err != nil {
			return fmt.Errorf("entrylog %s: remove unused %s: %w", s.dir, p, err)
		}
		return s.fs.SyncDir(s.dir)
	}
	lf, err := s.logs.openExisting(id)
	if err != nil {
		return err
	}
	var total int64
	for _, n := range usage {
		total += n
	}
	size := lf.f.Size()
	if LogHeaderSize+total > size {
		lf.f.Close()
		return engine.CorruptionErrorf("entrylog %s: entry log %s is %d bytes, the index has %d bytes of records in it",
			s.dir, lf.path, size, total)
	}
	if err := s.logs.releaseTail(lf.path, size); err != nil {
		lf.f.Close()
		return err
	}
	s.logs.add(lf)
	return nil
}

// close releases files and the index; the caller flushed first.
func (s *shard) close() error {
	return errors.Join(s.logs.closeAll(), s.ix.close())
}

// appendFailed handles a failed append of records to the entry log (a
// flush or a compaction) that began at off in log logID. A full disk met
// on a preallocation, a new log or a write lost nothing: nothing points at
// those bytes (the index commit comes after the sync), the records are
// still where they were (write cache or old log), and the next attempt
// writes them again over the same bytes. So the storage goes on, failing
// with ErrNoSpace until space is freed. Anything else (a failed sync
// among them) fails the storage. Caller holds writeMu.
func (s *shard) appendFailed(err error, logID uint64, off int64) error {
	if !errors.Is(err, ErrNoSpace) && !engine.IsNoSpaceOnWrite(err) {
		return s.failed(err)
	}
	s.logs.rewind(logID, off)
	s.stats.noSpace.Add(1)
	if last := s.noSpaceLogged.Load(); time.Since(time.Unix(0, last)) > 10*time.Second {
		s.noSpaceLogged.Store(time.Now().UnixNano())
		s.log.Warn("entry log out of space; flushes wait for free space (entries stay in the write cache)", "err", err)
	}
	if errors.Is(err, ErrNoSpace) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrNoSpace, s.dir, err)
}

// failed records a write failure: the storage stops taking changes.
func (s *shard) failed(err error) error {
	ferr := s.fail.set(err, s.log)
	s.wc.stop(ferr)
	return ferr
}

// ledgerIDs returns the ids of ledgers with state, sorted.
func (s *shard) ledgerIDs() []int64 {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.mu.ledgers))
	for id := range s.mu.ledgers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

func (s *shard) ledgerCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.ledgers)
}
