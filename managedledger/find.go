package managedledger

import (
	"context"
	"errors"
	"fmt"
)

// FindFirst (Pulsar's OpFindNewest, which resetCursor by timestamp uses).
//
// Behaviour:
//   - A binary search over the global indices of the entries stored when
//     it starts (entries added meanwhile are not searched), across
//     ledgers: it reads at most ceil(log2(n+1)) entries of n, each through
//     the normal read path (the entry cache first, then the ledger).
//   - Nothing matching: the position after the last entry, as LastConfirmed
//     with EntryID+1 (what the broker's seek by time always returned): a
//     cursor Reset to it reads the next entry added, also when it lies in
//     the next ledger, and on an empty stream.
//   - An entry trimmed during the search counts as not matching: trimmed
//     entries precede every stored one. A match found among entries
//     trimmed meanwhile becomes the first stored entry (match is
//     monotonic, so that one matches too).
//   - match runs with no lock held.

// searchFirst returns the first index in [lo, hi) whose probe is true, or
// hi when none is, probing at most ceil(log2(hi-lo+1)) indices (probes
// must be monotonic: false ... false true ... true).
func searchFirst(ctx context.Context, lo, hi int64, probe func(i int64) (bool, error)) (int64, error) {
	for lo < hi { // halves hi-lo each round: at most 64 rounds
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		mid := lo + (hi-lo)/2
		ok, err := probe(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// afterLast is the position after last (LastConfirmed): what a cursor
// reset to reads the next entry added from.
func afterLast(last Position) Position {
	return Position{LedgerID: last.LedgerID, EntryID: last.EntryID + 1}
}

// FindFirst implements ManagedLedger.
func (ml *bkLedger) FindFirst(ctx context.Context, match func(Entry) (bool, error)) (Position, bool, error) {
	ml.mu.Lock()
	if ml.mu.closed {
		ml.mu.Unlock()
		return Position{}, false, fmt.Errorf("%s: find: %w", ml.name, ErrClosed)
	}
	base, end := ml.baseLocked(), ml.endLocked()
	last := ml.positionLocked(end - 1)
	ml.mu.Unlock()
	i, err := searchFirst(ctx, base, end, func(i int64) (bool, error) { return ml.probe(ctx, i, match) })
	if err != nil {
		return Position{}, false, fmt.Errorf("%s: find: %w", ml.name, err)
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if i = max(i, ml.baseLocked()); i >= end {
		return afterLast(last), false, nil
	}
	return ml.positionLocked(i), true, nil
}

// probe reads the entry at index i and matches it; a trimmed entry does
// not match.
func (ml *bkLedger) probe(ctx context.Context, i int64, match func(Entry) (bool, error)) (bool, error) {
	es, err := ml.fetch(ctx, []int64{i})
	if err != nil {
		ml.mu.Lock()
		trimmed := i < ml.baseLocked()
		ml.mu.Unlock()
		if trimmed || errors.Is(err, errTrimmed) {
			return false, nil // its ledger may be gone before the read: check the index, not the error
		}
		return false, err
	}
	return match(es[0])
}

// FindFirst implements ManagedLedger.
func (ml *memoryLedger) FindFirst(ctx context.Context, match func(Entry) (bool, error)) (Position, bool, error) {
	ml.mu.Lock()
	if ml.closed {
		ml.mu.Unlock()
		return Position{}, false, fmt.Errorf("%s: find: %w", ml.name, ErrClosed)
	}
	base, end := ml.base, ml.endLocked()
	last := ml.positionLocked(end - 1)
	ml.mu.Unlock()
	i, err := searchFirst(ctx, base, end, func(i int64) (bool, error) {
		ml.mu.Lock()
		if i < ml.base {
			ml.mu.Unlock()
			return false, nil // trimmed
		}
		e := ml.entries[i-ml.base]
		ml.mu.Unlock()
		return match(e)
	})
	if err != nil {
		return Position{}, false, fmt.Errorf("%s: find: %w", ml.name, err)
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if i = max(i, ml.base); i >= end {
		return afterLast(last), false, nil
	}
	return ml.positionLocked(i), true, nil
}
