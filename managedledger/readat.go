package managedledger

// Reads by position (ReadEntriesAt): what a dispatcher sends again from
// its replay set, usually runs of consecutive entries. The ledger-backed
// implementation fetches each run with one ledger read (so batch reads
// apply) instead of one read per entry.

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// ReadEntriesAt implements ManagedLedger.
func (ml *bkLedger) ReadEntriesAt(ctx context.Context, positions []Position) ([]Entry, error) {
	ml.mu.Lock()
	indices := make([]int64, 0, len(positions))
	for _, p := range positions {
		if i, ok := ml.indexAtLocked(p); ok && i >= ml.baseLocked() {
			indices = append(indices, i)
		}
	}
	ml.mu.Unlock()
	slices.Sort(indices)
	indices = slices.Compact(indices)
	entries, err := ml.fetch(ctx, indices)
	if errors.Is(err, errTrimmed) {
		return ml.readEach(ctx, positions) // trimmed while reading: take what is left
	}
	return entries, err
}

// readEach reads positions one at a time, leaving out those not stored.
func (ml *bkLedger) readEach(ctx context.Context, positions []Position) ([]Entry, error) {
	var out []Entry
	for _, p := range positions {
		e, err := ml.ReadEntry(ctx, p)
		if errors.Is(err, ErrInvalidPosition) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ReadEntriesAt implements ManagedLedger.
func (ml *memoryLedger) ReadEntriesAt(ctx context.Context, positions []Position) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sorted := slices.SortedFunc(slices.Values(positions), Position.Compare)
	sorted = slices.Compact(sorted)
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if ml.closed {
		return nil, fmt.Errorf("%s: read: %w", ml.name, ErrClosed)
	}
	out := make([]Entry, 0, len(sorted))
	for _, p := range sorted {
		i := ml.indexAtOrAfterLocked(p)
		if i < ml.endLocked() && ml.entries[i-ml.base].Position == p {
			out = append(out, ml.entries[i-ml.base])
		}
	}
	return out, nil
}
