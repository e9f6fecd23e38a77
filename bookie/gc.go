package bookie

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/entrylog"
)

// LedgerOracle says whether a ledger still exists in cluster metadata.
// The ledger client implements it over the ledger metadata store. It must
// not answer false from a read that may be stale (a metadata server behind
// the others): the ledger client syncs first (metadata.Sync).
type LedgerOracle interface {
	LedgerExists(ctx context.Context, ledgerID int64) (bool, error)
}

// CollectGarbage deletes from this bookie every ledger whose metadata is
// gone. It is safe against ledgers being created meanwhile because a
// ledger's metadata is written before any entry reaches a bookie, and
// ledger ids are never reused: a ledger stored here without metadata was
// deleted. An oracle error stops the pass without deleting anything more.
// It returns the number of ledgers deleted.
func (c *Core) CollectGarbage(ctx context.Context, oracle LedgerOracle) (int, error) {
	var ids []int64
	if err := c.storage.Ledgers(func(id int64) bool { ids = append(ids, id); return true }); err != nil {
		return 0, fmt.Errorf("bookie gc: list ledgers: %w", err)
	}
	deleted := 0
	for _, id := range ids {
		exists, err := oracle.LedgerExists(ctx, id)
		if err != nil {
			return deleted, fmt.Errorf("bookie gc: does ledger %d exist: %w", id, err)
		}
		if exists {
			continue
		}
		if err := c.DeleteLedger(id); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

// RunGC runs CollectGarbage every interval (gcWaitTime) until ctx ends,
// logging what it deleted and any failure.
func (c *Core) RunGC(ctx context.Context, oracle LedgerOracle, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := c.CollectGarbage(ctx, oracle)
		if n > 0 {
			c.log.Info("bookie gc deleted ledgers whose metadata is gone", "ledgers", n)
		}
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, entrylog.ErrClosed) {
			c.log.Warn("bookie gc pass failed; retrying at the next interval", "err", err)
		}
	}
}
