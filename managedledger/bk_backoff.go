package managedledger

// Write-failure backoff (issue 30). A write failure rolls the managed
// ledger over to a new ledger and appends the failed adds to it again, as
// Pulsar does: a bookie may have failed alone. When failures go on (a
// full disk its bookie has not announced yet), rolling over at once made a
// ledger, with its metadata and journal writes, per failure: 536 in 2 s
// for one add, which never called back. So:
//   - the first rollover after a failure is immediate; each further one
//     while failures continue waits FailureBackoff, doubling up to
//     FailureBackoffMax, jittered (so topics sharing a disk spread out);
//   - failed adds are appended again at most maxAddRetries times, then
//     fail, and adds stay stopped until the owner resumes them;
//   - a ledger that got no entry is dropped from the list with the next
//     one and deleted, so failures leave nothing behind in metadata.
//
// A stored add ends the run of failures.

import (
	"math/rand/v2"
	"time"
)

// maxAddRetries is how many new ledgers the adds of a failed write are
// appended to before they fail.
const maxAddRetries = 3

// backoffPoll bounds how long a rollover waiting out its backoff takes to
// notice the ledger closed.
const backoffPoll = 50 * time.Millisecond

// noteFailureLocked counts a write failure or a failed rollover.
func (ml *bkLedger) noteFailureLocked() { ml.mu.failures++ }

// backoffLocked is the wait before the next ledger: none after a single
// failure, then FailureBackoff doubling to FailureBackoffMax, drawn from
// the upper half of that so it never drops to zero.
func (ml *bkLedger) backoffLocked() time.Duration {
	n := ml.mu.failures
	if n <= 1 {
		return 0
	}
	d := ml.cfg.FailureBackoff << min(n-2, 30)
	if d <= 0 || d > ml.cfg.FailureBackoffMax {
		d = ml.cfg.FailureBackoffMax
	}
	return d/2 + rand.N(d/2+1)
}

// retriesExhaustedLocked reports whether the failed adds were appended
// again often enough: they fail now instead of taking another ledger.
func (ml *bkLedger) retriesExhaustedLocked() bool {
	return len(ml.mu.failed) > 0 && ml.mu.failures > maxAddRetries
}

// waitBackoff waits out the backoff due before the next ledger. It
// returns false if the managed ledger closed or was fenced meanwhile.
func (ml *bkLedger) waitBackoff() bool {
	ml.mu.Lock()
	d, n := ml.backoffLocked(), ml.mu.failures
	ml.mu.Unlock()
	if d > 0 {
		ml.f.log.Info("managed ledger backing off before a new ledger", "managed_ledger", ml.name,
			"failures", n, "wait", d.Round(time.Millisecond))
	}
	deadline := time.Now().Add(d)
	for {
		ml.mu.Lock()
		stopped := ml.mu.closed || ml.mu.fenced != nil
		ml.mu.Unlock()
		if stopped {
			return false
		}
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		time.Sleep(min(left, backoffPoll))
	}
}

// withoutEmptyLastLocked is the ledger list without its last ledger if
// that one got no entry (its adds failed), and that ledger's id (0 if
// none was dropped). Dropping it changes no global index.
func (ml *bkLedger) withoutEmptyLastLocked() ([]*ledgerInfo, int64) {
	n := len(ml.mu.ledgers)
	if n == 0 || ml.mu.ledgers[n-1].meta.Entries > 0 {
		return ml.mu.ledgers, 0
	}
	return ml.mu.ledgers[:n-1], ml.mu.ledgers[n-1].meta.ID
}
