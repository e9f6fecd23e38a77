package managedledger

// LedgerInfo describes one ledger of a managed ledger (internal stats).
type LedgerInfo struct {
	ID        int64
	Entries   int64 // confirmed entries
	Size      int64 // bytes of those entries
	Timestamp int64 // unix ms when the ledger was closed; 0 while it is written
}

// LedgerLister is a managed ledger that can list its ledgers, oldest
// first (both implementations can).
type LedgerLister interface {
	Ledgers() []LedgerInfo
}

var (
	_ LedgerLister = (*bkLedger)(nil)
	_ LedgerLister = (*memoryLedger)(nil)
)

// Ledgers implements LedgerLister: the ledgers in the managed ledger's
// list, the one being written last.
func (ml *bkLedger) Ledgers() []LedgerInfo {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	out := make([]LedgerInfo, 0, len(ml.mu.ledgers))
	for _, l := range ml.mu.ledgers {
		out = append(out, LedgerInfo{ID: l.meta.ID, Entries: l.meta.Entries, Size: l.meta.Size, Timestamp: l.meta.Timestamp})
	}
	return out
}

// Ledgers implements LedgerLister: the ledger ids of the stored entries
// (ids roll over every MaxEntriesPerLedger entries).
func (ml *memoryLedger) Ledgers() []LedgerInfo {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	var out []LedgerInfo
	for _, e := range ml.entries {
		if n := len(out); n == 0 || out[n-1].ID != e.Position.LedgerID {
			out = append(out, LedgerInfo{ID: e.Position.LedgerID, Timestamp: ml.closedAt[e.Position.LedgerID]})
		}
		out[len(out)-1].Entries++
		out[len(out)-1].Size += int64(len(e.Data))
	}
	return out
}

// Terminated implements ManagedLedger.
func (ml *bkLedger) Terminated() bool {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.mu.terminated != nil
}

// Terminated implements ManagedLedger.
func (ml *memoryLedger) Terminated() bool {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.terminated
}
