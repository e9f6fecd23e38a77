package offload

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/ledger"
)

// copyEntries reads entries 0..src.LastAddConfirmed() in bounded batches
// and hands each batch to sink, in order. Both drivers copy through it, so
// both check the Source the same way: every batch is non-empty, holds the
// entries asked for in order, of this ledger, each within MaxEntrySize. A
// Source that breaks that is an error, never a gap in the copy.
func copyEntries(ctx context.Context, k Key, src Source, lim batchLimits, sink func([]ledger.Entry) error) error {
	lac := src.LastAddConfirmed()
	if lac < -1 {
		return fmt.Errorf("offload %v: source has LAC %d", k, lac)
	}
	count := lim.entries
	// Each round copies at least one entry, so the loop runs at most
	// lac+1 times.
	for next := int64(0); next <= lac; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("offload %v: stopped before entry %d: %w", k, next, err)
		}
		last := min(next+int64(count)-1, lac)
		ents, err := src.Read(ctx, next, last)
		if err != nil {
			return fmt.Errorf("offload %v: read entries %d..%d from the ledger: %w", k, next, last, err)
		}
		size, err := checkBatch(k, ents, next, last)
		if err != nil {
			return err
		}
		if err := sink(ents); err != nil {
			return err
		}
		next += int64(len(ents))
		count = lim.nextCount(len(ents), size)
	}
	return nil
}

// checkBatch checks a Source's answer to Read(first, last) and returns its
// payload bytes.
func checkBatch(k Key, ents []ledger.Entry, first, last int64) (int, error) {
	if len(ents) == 0 || int64(len(ents)) > last-first+1 {
		return 0, fmt.Errorf("offload %v: source returned %d entries for %d..%d", k, len(ents), first, last)
	}
	size := 0
	for i, e := range ents {
		if e.EntryID != first+int64(i) || e.LedgerID != k.LedgerID {
			return 0, fmt.Errorf("offload %v: source returned ledger %d entry %d where entry %d was due",
				k, e.LedgerID, e.EntryID, first+int64(i))
		}
		if len(e.Payload) > MaxEntrySize {
			return 0, fmt.Errorf("offload %v: entry %d is %d bytes, over the limit of %d", k, e.EntryID, len(e.Payload), MaxEntrySize)
		}
		size += len(e.Payload)
	}
	return size, nil
}

// nextCount sizes the next batch from the entries seen in the last one, so
// that a batch holds about l.bytes: one read of a ledger of 1 MiB entries
// is a few entries, one of 100-byte entries is l.entries.
func (l batchLimits) nextCount(n, size int) int {
	if size == 0 {
		return l.entries
	}
	avg := max(size/n, 1)
	return min(max(l.bytes/avg, 1), l.entries)
}
