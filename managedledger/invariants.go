package managedledger

import "github.com/magnetar-io/magnetar/internal/invariants"

// checkTrimLocked checks, in invariants builds, that trimming never went
// past the slowest durable cursor: every entry after a cursor's
// mark-delete position is still stored (the first stored index is at
// most markDelete+1). ml.mu is held.
func (ml *bkLedger) checkTrimLocked() {
	if !invariants.Enabled || !ml.mu.recovered || len(ml.mu.ledgers) == 0 {
		return
	}
	base := ml.baseLocked()
	for _, c := range ml.mu.cursors {
		if c.markDelete+1 < base {
			invariants.Failf("managed ledger %s trimmed to index %d, below cursor %s's first unacknowledged entry %d", ml.name, base, c.name, c.markDelete+1)
		}
	}
}
