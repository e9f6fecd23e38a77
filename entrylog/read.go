package entrylog

import (
	"errors"
	"fmt"
	"io"

	"github.com/magnetar-io/magnetar/engine"
)

// maxLookups bounds how often a read follows an entry that compaction keeps
// moving; each retry sees a newer index, so more than a couple means
// something is wrong.
const maxLookups = 4

// readEntry looks in the write cache, then the read cache, then the index
// and the entry log.
func (s *shard) readEntry(ledgerID, entryID int64) ([]byte, error) {
	if !s.hasLedger(ledgerID) {
		return nil, noLedger(ledgerID)
	}
	if p, ok := s.wc.get(ledgerID, entryID); ok {
		s.stats.writeCacheHits.Add(1)
		return p, nil
	}
	if p, ok := s.rc.get(entryKeyID{ledgerID, entryID}); ok {
		return p, nil
	}
	return s.readFromLog(ledgerID, entryID)
}

// readFromLog reads an entry (and the ones after it, ahead) from its entry
// log. The stale-location rule: the log is pinned before it is read; if it
// cannot be pinned it was retired after the index stopped pointing into it,
// so the entry is looked up again. An index that still gives the same
// location for a log that is not open is corruption.
func (s *shard) readFromLog(ledgerID, entryID int64) ([]byte, error) {
	var tried location
	for attempt := 0; attempt < maxLookups; attempt++ {
		epoch := s.rc.epoch()
		run, err := s.lookupRun(ledgerID, entryID)
		if err != nil {
			return nil, err
		}
		if len(run) == 0 {
			if !s.hasLedger(ledgerID) {
				return nil, noLedger(ledgerID)
			}
			return nil, fmt.Errorf("ledger %d entry %d: %w", ledgerID, entryID, ErrNoEntry)
		}
		if attempt > 0 && run[0].loc == tried {
			return nil, fmt.Errorf("ledger %d entry %d: %w", ledgerID, entryID,
				engine.CorruptionErrorf("entrylog %s: the index points at %v, and that log is not open", s.dir, tried))
		}
		s.hook("read:looked-up")
		lf, ok := s.logs.acquire(run[0].loc.logID)
		if !ok {
			tried = run[0].loc
			continue
		}
		s.hook("read:pinned")
		p, err := s.readRun(lf, run, epoch)
		s.logs.release(lf)
		return p, err
	}
	return nil, fmt.Errorf("ledger %d entry %d: entrylog %s: the entry moved %d times while being read",
		ledgerID, entryID, s.dir, maxLookups)
}

type located struct {
	key entryKeyID
	loc location
}

// lookupRun returns the entry's location followed by those of the next
// entries of the ledger that lie after it in the same log, within the
// read-ahead limits, so one read fetches them all (a flush wrote them
// adjacent). Empty if the entry is not in the index.
func (s *shard) lookupRun(ledgerID, entryID int64) (run []located, err error) {
	_, upper := ledgerEntriesBounds(ledgerID)
	it, err := s.ix.iter(entryKey(ledgerID, entryID), upper)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = indexError(s.ix.dir, "iterate", cerr)
		}
	}()
	limit := max(s.opts.ReadAheadBatchSize, 1)
	for ok := it.First(); ok && len(run) < limit; ok = it.Next() {
		l, e, kok := decodeEntryKey(it.Key())
		v, verr := it.ValueAndErr()
		if verr != nil {
			return nil, indexError(s.ix.dir, "read", verr)
		}
		loc, lok := decodeLocation(v)
		if !kok || !lok {
			return nil, corruptKey(s.ix.dir, it.Key(), "bad entry location %x", v)
		}
		if len(run) == 0 {
			if e != entryID {
				return nil, nil
			}
		} else if !extendsRun(run, loc, s.opts.ReadAheadMaxBytes) {
			break
		}
		run = append(run, located{entryKeyID{l, e}, loc})
	}
	return run, nil
}

// extendsRun reports whether loc can join the run's single read.
func extendsRun(run []located, loc location, maxBytes int64) bool {
	first, prev := run[0].loc, run[len(run)-1].loc
	return loc.logID == first.logID && loc.offset >= prev.offset+prev.recordSize() &&
		loc.offset+loc.recordSize()-first.offset <= maxBytes
}

// readRun reads the run's records with one read, checks each, caches them
// and returns the first one's payload. Payloads share the read buffer,
// which is never reused. A bad first record is corruption; a bad record
// read ahead is only left out of the cache (reading it will report it).
func (s *shard) readRun(lf *logFile, run []located, epoch uint64) ([]byte, error) {
	first := run[0].loc
	last := run[len(run)-1].loc
	buf, err := s.readSpan(lf, first.offset, last.offset+last.recordSize())
	if err != nil {
		return nil, fmt.Errorf("ledger %d entry %d: %w", run[0].key.ledgerID, run[0].key.entryID, err)
	}
	s.stats.logReads.Add(1)
	s.stats.logReadBytes.Add(int64(len(buf)))
	keys := make([]entryKeyID, 0, len(run))
	payloads := make([][]byte, 0, len(run))
	for i, r := range run {
		off := r.loc.offset - first.offset
		p, err := checkRecord(buf[off:off+r.loc.recordSize()], r.key, r.loc, lf.path)
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("ledger %d entry %d: %w", r.key.ledgerID, r.key.entryID, err)
			}
			continue
		}
		keys = append(keys, r.key)
		payloads = append(payloads, p)
	}
	s.rc.put(epoch, keys, payloads)
	return payloads[0], nil
}

// readSpan reads bytes [off, end) of lf into a buffer of their own. Logs
// written direct are read direct too (their pages are never in the page
// cache, and a buffered read would fill new ones: engine/direct.go says
// what that costs; the read cache keeps what readers come back for): the
// whole blocks around the span are read and the span returned from them.
// A file system without direct reads turns the set to buffered reads for
// good, said once.
func (s *shard) readSpan(lf *logFile, off, end int64) ([]byte, error) {
	if s.logs.directReads.Load() {
		from := off &^ (engine.DirectAlign - 1)
		buf := engine.AlignedBuffer(int(alignBlock(end) - from))
		n, err := lf.f.ReadDirect(buf, from)
		if !errors.Is(err, engine.ErrDirectUnsupported) {
			if err := spanRead(lf, off, end, int64(n)+from, err); err != nil {
				return nil, err
			}
			return buf[off-from : end-from], nil
		}
		if s.logs.directReads.Swap(false) {
			s.log.Warn("entry log: the file system has no direct I/O; reading through the page cache", "dir", s.dir, "err", err)
		}
	}
	buf := make([]byte, end-off)
	n, err := lf.f.ReadAt(buf, off)
	if err := spanRead(lf, off, end, off+int64(n), err); err != nil {
		return nil, err
	}
	return buf, nil
}

// spanRead judges a read meant to cover [off, end) that reached got: the
// end of the file before end means the index points past the log's end.
func spanRead(lf *logFile, off, end, got int64, err error) error {
	switch {
	case err == nil || errors.Is(err, io.EOF) && got >= end:
		return nil
	case errors.Is(err, io.EOF):
		return engine.CorruptionErrorf("entry log %s: the index points at offset %d length %d, past its end (%d bytes read)",
			lf.path, off, end-off, max(got-off, 0))
	default:
		return err
	}
}

// checkRecord decodes the record the index located and checks it is the
// entry asked for.
func checkRecord(b []byte, k entryKeyID, loc location, path string) ([]byte, error) {
	rec, n, reason := decodeRecord(b)
	switch {
	case reason != "":
		return nil, engine.CorruptionErrorf("entry log %s offset %d: %s", path, loc.offset, reason)
	case n != len(b):
		return nil, engine.CorruptionErrorf("entry log %s offset %d: record of %d bytes, the index says %d",
			path, loc.offset, n, len(b))
	case rec.ledgerID != k.ledgerID || rec.entryID != k.entryID:
		return nil, engine.CorruptionErrorf("entry log %s offset %d: record of ledger %d entry %d, the index says ledger %d entry %d",
			path, loc.offset, rec.ledgerID, rec.entryID, k.ledgerID, k.entryID)
	}
	return rec.payload, nil
}

// lastEntryID returns the highest entry id in the write cache or the index.
func (s *shard) lastEntryID(ledgerID int64) (int64, error) {
	if !s.hasLedger(ledgerID) {
		return 0, noLedger(ledgerID)
	}
	last, ok := s.wc.last(ledgerID)
	lower, upper := ledgerEntriesBounds(ledgerID)
	it, err := s.ix.iter(lower, upper)
	if err != nil {
		return 0, err
	}
	if it.Last() {
		_, e, kok := decodeEntryKey(it.Key())
		if !kok {
			err = corruptKey(s.ix.dir, it.Key(), "not an entry key")
		} else if !ok || e > last {
			last, ok = e, true
		}
	}
	if cerr := it.Close(); cerr != nil && err == nil {
		err = indexError(s.ix.dir, "iterate", cerr)
	}
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("ledger %d has no entries: %w", ledgerID, ErrNoEntry)
	}
	return last, nil
}
