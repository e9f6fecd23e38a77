package entrylog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// compactChunk bounds the live records one compaction step reads, writes
// and commits, so compaction's memory and its hold on writeMu stay small.
const compactChunk = 4 << 20

// maxWriteChunk bounds one vectored write, so a flush of a large cache
// half is several writes rather than one unbounded one; each is handed to
// the device as it is made (logSet.write), so this is also how much
// writeback a flush puts in front of the journal's datasyncs at a time.
const maxWriteChunk = 1 << 20

// logStat is a sealed entry log's usage.
type logStat struct {
	id      uint64
	size    int64   // record bytes in the file (its size less the header)
	live    int64   // bytes of records of ledgers that still exist (an upper bound of what is live)
	ledgers []int64 // ledgers with records there that still exist
}

func (st logStat) usage() float64 {
	if st.size <= 0 {
		return 0
	}
	return float64(st.live) / float64(st.size)
}

// sealedLogs returns the usage of every sealed log. Taking writeMu first
// means no write into a sealed log is still waiting for its index commit,
// so usage cannot grow afterwards; it can only shrink, as ledgers are
// deleted and never come back.
func (s *shard) sealedLogs() []logStat {
	s.writeMu.Lock()
	cur := s.logs.currentID()
	s.writeMu.Unlock()
	ids := s.logs.ids()
	slices.Sort(ids)
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logStat
	for _, id := range ids {
		if id >= cur {
			continue
		}
		st := logStat{id: id, size: s.logSize(id)}
		for ledgerID, n := range s.logUsage[id] {
			if s.mu.ledgers[ledgerID] != nil {
				st.live += n
				st.ledgers = append(st.ledgers, ledgerID)
			}
		}
		slices.Sort(st.ledgers)
		out = append(out, st)
	}
	return out
}

func (s *shard) logSize(id uint64) int64 {
	lf, ok := s.logs.acquire(id)
	if !ok {
		return 0
	}
	defer s.logs.release(lf)
	return lf.f.Size() - LogHeaderSize
}

// collect removes the sealed logs no live record uses, then compacts those
// whose usage is below threshold (threshold <= 0: none).
func (s *shard) collect(ctx context.Context, threshold float64) error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	s.stats.gcRuns.Add(1)
	stats := s.sealedLogs()
	var dead []uint64
	for _, st := range stats {
		if st.live == 0 {
			dead = append(dead, st.id)
		}
	}
	if err := s.dropLogs(ctx, dead); err != nil {
		return err
	}
	var errs []error
	for _, st := range stats {
		if st.live == 0 || st.usage() >= threshold {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.compactLog(ctx, st); err != nil {
			if ctx.Err() != nil {
				return err // stopped (Close, or the caller gave up), not failed
			}
			s.log.Error("entry log compaction failed; the log is kept", "log", logFileName(st.id), "err", err)
			errs = append(errs, err)
			if s.fail.check() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// dropLogs forgets the logs' usage (synced), then retires them and removes
// their files once no reader pins them. The caller made sure no index entry
// points into them.
func (s *shard) dropLogs(ctx context.Context, ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.dropUsage(ids); err != nil {
		return s.failed(err)
	}
	s.hook("gc:usage-dropped")
	var errs []error
	for _, id := range ids {
		lf, drained := s.logs.retire(id)
		if lf == nil {
			continue
		}
		size := lf.f.Size()
		if err := s.logs.remove(ctx, lf, drained); err != nil {
			errs = append(errs, err) // an orphan file; the next open removes it
			continue
		}
		s.stats.logsRemoved.Add(1)
		s.stats.reclaimedBytes.Add(size)
		s.log.Info("entry log removed", "log", logFileName(id), "bytes", size)
	}
	return errors.Join(errs...)
}

func (s *shard) dropUsage(ids []uint64) error {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	b := s.ix.db.NewBatch()
	for _, id := range ids {
		lower, upper := logMetaBounds(id)
		if err := b.DeleteRange(lower, upper, nil); err != nil {
			return fmt.Errorf("entrylog %s: index batch: %w", s.dir, err)
		}
	}
	if err := s.ix.commit(b, true); err != nil {
		return err
	}
	for _, id := range ids {
		delete(s.logUsage, id)
	}
	return nil
}

// compactLog copies the live records of a sealed log to the current one,
// moves their index entries (only where the index still points at the old
// copy), then drops the log.
func (s *shard) compactLog(ctx context.Context, st logStat) error {
	s.log.Info("compacting entry log", "log", logFileName(st.id), "usage", st.usage(), "bytes", st.size)
	var moved int64
	for _, ledgerID := range st.ledgers {
		n, err := s.compactLedger(ctx, st.id, ledgerID)
		moved += n
		if err != nil {
			return err
		}
	}
	if err := s.dropLogs(ctx, []uint64{st.id}); err != nil {
		return err
	}
	s.stats.compactions.Add(1)
	s.log.Info("entry log compacted", "log", logFileName(st.id), "moved_bytes", moved)
	return nil
}

// compactLedger moves one ledger's records out of log id, a chunk at a
// time.
func (s *shard) compactLedger(ctx context.Context, id uint64, ledgerID int64) (int64, error) {
	lower, upper := ledgerEntriesBounds(ledgerID)
	var chunk []located
	var chunkBytes, moved int64
	move := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := s.moveRecords(id, chunk)
		moved += n
		chunk, chunkBytes = chunk[:0], 0
		return err
	}
	err := s.ix.scan(lower, upper, func(k, v []byte) (bool, error) {
		l, e, kok := decodeEntryKey(k)
		loc, lok := decodeLocation(v)
		if !kok || !lok {
			return false, corruptKey(s.ix.dir, k, "bad entry location %x", v)
		}
		if loc.logID != id {
			return true, nil
		}
		chunk = append(chunk, located{entryKeyID{l, e}, loc})
		chunkBytes += loc.recordSize()
		if chunkBytes >= compactChunk {
			return true, move()
		}
		return true, nil
	})
	if err == nil && len(chunk) > 0 {
		err = move()
	}
	return moved, err
}

// moveRecords reads records from log id, checks them, appends them to the
// current log, syncs, and moves their index entries by compare-and-set.
func (s *shard) moveRecords(id uint64, chunk []located) (int64, error) {
	slices.SortFunc(chunk, func(a, b located) int { return cmp.Compare(a.loc.offset, b.loc.offset) })
	recs, err := s.readRecords(id, chunk)
	if err != nil {
		return 0, err
	}
	s.hook("compact:records-read")
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.fail.check(); err != nil {
		return 0, err
	}
	keys := make([]entryKeyID, len(chunk))
	old := make([]location, len(chunk))
	for i, c := range chunk {
		keys[i], old[i] = c.key, c.loc
	}
	logID, off := s.logs.currentID(), s.logs.off
	locs, err := s.appendRecords(recs, s.pacer(true))
	if err == nil {
		err = s.logs.sync()
	}
	if err != nil {
		return 0, s.appendFailed(err, logID, off) // the records stay where they were
	}
	s.hook("compact:log-synced")
	if err := s.commitLocations(keys, locs, old); err != nil {
		return 0, s.failed(err)
	}
	s.hook("compact:index-committed")
	var n int64
	for _, l := range locs {
		n += l.recordSize()
	}
	s.stats.compactedBytes.Add(n)
	return n, nil
}

// readRecords reads the chunk's records (sorted by offset) from log id,
// one read per run of adjacent records, and checks each.
func (s *shard) readRecords(id uint64, chunk []located) ([]outRecord, error) {
	lf, ok := s.logs.acquire(id)
	if !ok {
		return nil, fmt.Errorf("entrylog %s: compacting %s: the log is not open", s.dir, logFileName(id))
	}
	defer s.logs.release(lf)
	recs := make([]outRecord, 0, len(chunk))
	for i := 0; i < len(chunk); {
		j := i + 1
		for j < len(chunk) && chunk[j].loc.offset == chunk[j-1].loc.offset+chunk[j-1].loc.recordSize() {
			j++
		}
		start := chunk[i].loc.offset
		buf, err := s.readSpan(lf, start, chunk[j-1].loc.offset+chunk[j-1].loc.recordSize())
		if err != nil {
			return nil, fmt.Errorf("entrylog %s: compacting %s: read at %d: %w", s.dir, lf.path, start, err)
		}
		for _, c := range chunk[i:j] {
			off := c.loc.offset - start
			rec := buf[off : off+c.loc.recordSize()]
			if _, err := checkRecord(rec, c.key, c.loc, lf.path); err != nil {
				return nil, fmt.Errorf("entrylog %s: compacting: %w", s.dir, err)
			}
			recs = append(recs, outRecord{head: rec})
		}
		i = j
	}
	return recs, nil
}

// outRecord is a record to append: head, then kept (a payload held apart
// from its header, or nil).
type outRecord struct{ head, kept []byte }

// appendRecords writes whole records into the current log (rotating when
// full), one vectored write per chunk, and returns where each went.
// Records adjacent in memory are written as one buffer. Caller holds
// writeMu.
func (s *shard) appendRecords(recs []outRecord, pace *pacer) ([]location, error) {
	locs := make([]location, len(recs))
	var bufs [][]byte
	var pending int64
	for i, rec := range recs {
		n := int64(len(rec.head) + len(rec.kept))
		if !s.logs.room(pending, n) {
			if err := s.logs.write(bufs, pending); err != nil {
				return nil, err
			}
			bufs, pending = bufs[:0], 0
			if err := s.logs.rotate(); err != nil {
				return nil, err
			}
		}
		locs[i] = location{logID: s.logs.currentID(), offset: s.logs.off + pending, length: uint32(n - RecordHeaderSize)}
		bufs = appendAdjacent(bufs, rec.head)
		if rec.kept != nil {
			bufs = appendAdjacent(bufs, rec.kept)
		}
		pending += n
		if pending >= maxWriteChunk {
			if err := s.logs.write(bufs, pending); err != nil {
				return nil, err
			}
			pace.wrote(pending)
			bufs, pending = bufs[:0], 0
		}
	}
	if err := s.logs.write(bufs, pending); err != nil {
		return nil, err
	}
	return locs, s.logs.endWrite()
}

// appendAdjacent appends b to bufs, extending the last buffer instead when
// b starts right where it ends in memory.
func appendAdjacent(bufs [][]byte, b []byte) [][]byte {
	if len(bufs) > 0 && len(b) > 0 {
		last := bufs[len(bufs)-1]
		if cap(last)-len(last) >= len(b) && &last[:len(last)+1][len(last)] == &b[0] {
			bufs[len(bufs)-1] = last[:len(last)+len(b)]
			return bufs
		}
	}
	return append(bufs, b)
}
