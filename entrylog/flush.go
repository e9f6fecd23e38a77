package entrylog

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// flush writes the write cache to the entry log and commits the index.
// With all unset it flushes only a half that AddEntry swapped out (the
// background flusher's job). With all set it makes everything added before
// the call durable, and pending state changes too. Two rounds do: an add
// that came before the call is in the swapped-out half or the active one;
// the first round flushes the swapped-out half; if AddEntry swaps the
// active one out meanwhile, the second round flushes that, else it swaps
// the active half itself. Only a flush clears the swapped-out half, and it
// holds writeMu, so no second swap can slip in between.
//
// background is set for the flusher's and the periodic flushes, which
// nobody waits on: those are paced (FlushRate).
func (s *shard) flush(all, background bool) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.fail.check(); err != nil {
		return err
	}
	dirty := all && s.takeDirty()
	committed := false
	for round := 0; round < 2; round++ {
		b := s.wc.next(all && round == 1)
		if b == nil {
			continue
		}
		if err := s.flushBuf(b, s.pacer(background)); err != nil {
			return err
		}
		committed = true
	}
	if dirty && !committed {
		if err := s.ix.syncWAL(); err != nil {
			return s.failed(err)
		}
		s.hook("flush:state-synced")
	}
	return nil
}

func (s *shard) takeDirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.mu.dirty
	s.mu.dirty = false
	return d
}

// flushBuf writes one write-cache half: records sorted by (ledger, entry)
// into the entry log, datasync, then the index commit (synced), then the
// half is released. The order is what makes the index never point at bytes
// that are not durable.
func (s *shard) flushBuf(b *wbuf, pace *pacer) error {
	start := time.Now()
	keys := s.liveKeys(b.sorted())
	logID, off := s.logs.currentID(), s.logs.off
	locs, err := s.writeRecords(b, keys, pace)
	if err == nil {
		s.hook("flush:log-written")
		err = s.logs.sync()
	}
	if err != nil {
		err = s.appendFailed(err, logID, off) // b stays in the write cache
		if errors.Is(err, ErrNoSpace) {
			s.wc.outOfSpace(err)
		}
		return err
	}
	s.hook("flush:log-synced")
	if err := s.commitLocations(keys, locs, nil); err != nil {
		return s.failed(err)
	}
	s.hook("flush:index-committed")
	s.rc.invalidate(keys)
	flushedBytes := b.bytes
	s.wc.flushed(b) // b may be the next active half from here on
	s.stats.flushes.Add(1)
	s.stats.flushedEntries.Add(int64(len(keys)))
	s.stats.flushedBytes.Add(flushedBytes)
	s.stats.flushNanos.Add(int64(time.Since(start)))
	return nil
}

// liveKeys drops the entries of ledgers deleted since they were added, so
// their bytes are not even written.
func (s *shard) liveKeys(keys []entryKeyID) []entryKeyID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := keys[:0]
	last, live := int64(0), false
	for i, k := range keys {
		if i == 0 || k.ledgerID != last {
			last, live = k.ledgerID, s.mu.ledgers[k.ledgerID] != nil
		}
		if live {
			out = append(out, k)
		}
	}
	return out
}

// writeRecords writes b's records for keys, in order, into the current
// entry log. Caller holds writeMu.
func (s *shard) writeRecords(b *wbuf, keys []entryKeyID, pace *pacer) ([]location, error) {
	recs := make([]outRecord, len(keys))
	for i, k := range keys {
		recs[i].head, recs[i].kept = b.record(b.entries[k])
	}
	return s.appendRecords(recs, pace)
}

// commitChunk bounds the entries of one index batch. A flush of a
// 10,000-topic load has an entry of each of 10,000 ledgers, and its batch
// (an entry key and a log-usage key per ledger) kept a goroutine inside
// Pebble's memtable insert for 60 ms a second, in runs of 10-20 ms that
// no other goroutine of a one-core broker could interrupt: receipts
// waited behind them (TUNING.md). Between chunks the flusher yields.
const commitChunk = 512

// commitLocations commits entry locations, with the usage of the logs they
// point into, in batches of commitChunk entries: all but the last
// unsynced, the last synced, which makes the earlier ones durable too
// (Pebble's log is written in order). Each batch is whole on its own (its
// entries and the usage they add), so a crash between two leaves the
// index consistent, with part of this flush's entries in it: the journal
// still holds the rest, as it holds entries of a flush whose checkpoint
// was not written yet. Entries of ledgers deleted meanwhile are skipped
// (DeleteLedger holds indexMu too, so a ledger is either gone before a
// batch looks or its range deletion comes after that batch). With old set
// (compaction), an entry is moved only if the index still holds old[i]: a
// newer add or a deletion wins. Nothing is changed in memory unless a
// batch is committed; the caller fails the storage on an error.
func (s *shard) commitLocations(keys []entryKeyID, locs, old []location) error {
	for start := 0; ; start += s.opts.commitChunk {
		end := min(start+s.opts.commitChunk, len(keys))
		var o []location
		if old != nil {
			o = old[start:end]
		}
		last := end == len(keys) // an empty flush commits one empty, synced batch
		if err := s.commitBatch(keys[start:end], locs[start:end], o, last); err != nil || last {
			return err
		}
		s.hook("index:batch-committed")
		runtime.Gosched()
	}
}

// commitBatch is one batch of commitLocations, synced if sync.
func (s *shard) commitBatch(keys []entryKeyID, locs, old []location, sync bool) error {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	batch := s.ix.db.NewBatch()
	type logLedger struct {
		logID    uint64
		ledgerID int64
	}
	delta := map[logLedger]int64{}
	live := s.liveKeys(append([]entryKeyID(nil), keys...))
	j := 0
	for i, k := range keys {
		if j >= len(live) || live[j] != k {
			continue
		}
		j++
		if old != nil {
			same, err := s.indexHolds(k, old[i])
			if err != nil {
				return err
			}
			if !same {
				continue
			}
		}
		if err := batch.Set(entryKey(k.ledgerID, k.entryID), encodeLocation(locs[i]), nil); err != nil {
			return fmt.Errorf("entrylog %s: index batch: %w", s.dir, err)
		}
		delta[logLedger{locs[i].logID, k.ledgerID}] += locs[i].recordSize()
	}
	for ll, n := range delta {
		total := s.logUsage[ll.logID][ll.ledgerID] + n
		if err := batch.Set(logMetaKey(ll.logID, ll.ledgerID), encodeUint64(uint64(total)), nil); err != nil {
			return fmt.Errorf("entrylog %s: index batch: %w", s.dir, err)
		}
	}
	if err := s.ix.commit(batch, sync); err != nil {
		return err
	}
	for ll, n := range delta {
		u := s.logUsage[ll.logID]
		if u == nil {
			u = make(map[int64]int64)
			s.logUsage[ll.logID] = u
		}
		u[ll.ledgerID] += n
	}
	return nil
}

// indexHolds reports whether the index maps k to loc. Caller holds indexMu.
func (s *shard) indexHolds(k entryKeyID, loc location) (bool, error) {
	v, ok, err := s.ix.get(entryKey(k.ledgerID, k.entryID))
	if err != nil || !ok {
		return false, err
	}
	cur, valid := decodeLocation(v)
	return valid && cur == loc, nil
}
