package managedledger

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger/offload"
)

// errTrimmed: fetch found an index trimmed since it was planned.
var errTrimmed = fmt.Errorf("entry trimmed: %w", ErrInvalidPosition)

// fetch reads the entries at the given global indices (ascending): from
// the cache, else from the ledgers in runs of consecutive entries.
func (ml *bkLedger) fetch(ctx context.Context, indices []int64) ([]Entry, error) {
	out := make([]Entry, 0, len(indices))
	for len(indices) > 0 {
		ml.mu.Lock()
		if indices[0] < ml.baseLocked() {
			// Trimmed since it was planned (a reader, or an entry acked
			// meanwhile): positionLocked and ledgerAtLocked would name the
			// first kept ledger instead.
			ml.mu.Unlock()
			return out, fmt.Errorf("%s: read: entry %d was trimmed: %w", ml.name, indices[0], errTrimmed)
		}
		pos := ml.positionLocked(indices[0])
		k := ml.ledgerAtLocked(indices[0])
		l := ml.mu.ledgers[k]
		isCurrent := k == len(ml.mu.ledgers)-1
		w := ml.mu.writer
		entries := l.meta.Entries
		off := l.meta.Offload
		ml.mu.Unlock()
		// The run of indices in this ledger that are consecutive.
		n := 1
		for n < len(indices) && indices[n] == indices[n-1]+1 && indices[n]-l.first < entries {
			n++
		}
		run, err := ml.fetchRun(ctx, l, pos, n, isCurrent, w, off)
		if err != nil {
			return out, err
		}
		out = append(out, run...)
		indices = indices[n:]
	}
	return out, nil
}

// fetchRun reads n consecutive entries of ledger l from pos.
func (ml *bkLedger) fetchRun(ctx context.Context, l *ledgerInfo, pos Position, n int, isCurrent bool, w *ledger.WriteHandle, off *offloadMeta) ([]Entry, error) {
	out := make([]Entry, 0, n)
	missFrom := -1
	for i := range n {
		p := Position{pos.LedgerID, pos.EntryID + int64(i)}
		if data, ok := ml.f.cache.get(cacheKey{ml.id, p}); ok && missFrom < 0 {
			out = append(out, Entry{Position: p, Data: data})
			continue
		}
		missFrom = i
		break
	}
	if missFrom < 0 {
		return out, nil
	}
	first, last := pos.EntryID+int64(missFrom), pos.EntryID+int64(n-1)
	var entries []ledger.Entry
	var err error
	switch {
	case isCurrent && w != nil && w.ID() == l.meta.ID:
		entries, err = w.Read(ctx, first, last)
	case off != nil && off.Complete: // read where readers will have to once the bookies' copy goes
		var r offload.Reader
		if r, err = ml.offloadReader(ctx, l, off); err == nil {
			entries, err = r.Read(ctx, first, last)
		}
	default:
		var r *ledger.ReadHandle
		if r, err = ml.reader(ctx, l); err == nil {
			entries, err = r.Read(ctx, first, last)
		}
	}
	if err != nil {
		return out, fmt.Errorf("%s: read %d:%d..%d: %w", ml.name, l.meta.ID, first, last, err)
	}
	for _, e := range entries {
		out = append(out, Entry{Position: Position{l.meta.ID, e.EntryID}, Data: e.Payload})
	}
	return out, nil
}

// reader returns the read handle of a closed ledger, opening it once.
func (ml *bkLedger) reader(ctx context.Context, l *ledgerInfo) (*ledger.ReadHandle, error) {
	ml.mu.Lock()
	r := l.reader
	ml.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := ml.cfg.Ledgers.OpenNoRecovery(ctx, l.meta.ID, ml.cfg.Password)
	if err != nil {
		return nil, err
	}
	ml.mu.Lock()
	l.reader = r
	ml.mu.Unlock()
	return r, nil
}

func (ml *bkLedger) ReadEntry(ctx context.Context, pos Position) (Entry, error) {
	ml.mu.Lock()
	i, ok := ml.indexAtLocked(pos)
	ml.mu.Unlock()
	if !ok {
		return Entry{}, fmt.Errorf("%s: read %v: %w", ml.name, pos, ErrInvalidPosition)
	}
	es, err := ml.fetch(ctx, []int64{i})
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// entriesForLocked estimates how many entries fill maxBytes, from the
// stored ledgers' average entry size, so a read does not fetch entries it
// then drops for the byte limit (at least one).
func (ml *bkLedger) entriesForLocked(maxBytes int64) int {
	var n, size int64
	for _, l := range ml.mu.ledgers {
		n += l.meta.Entries
		size += l.meta.Size
	}
	if n == 0 || size == 0 {
		return 1 << 30
	}
	return int(min(max(maxBytes/(size/n)+1, 1), 1<<30))
}
