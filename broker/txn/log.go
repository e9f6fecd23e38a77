package txn

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/magnetar-io/magnetar/managedledger"
)

// LogCursor is the cursor of a coordinator's log: its mark-delete
// position is where the log was trimmed (so the managed ledger deletes
// the ledgers below it).
const LogCursor = "__txn_log"

// sequenceProperty names the managed-ledger property holding the highest
// sequence issued before the log was last trimmed.
const sequenceProperty = "txnSequence"

// MLLog is a Log in a managed ledger (Pulsar's __transaction_log_N).
type MLLog struct {
	ml     managedledger.ManagedLedger
	cursor managedledger.Cursor
}

// OpenMLLog opens the log's cursor on ml.
func OpenMLLog(ctx context.Context, ml managedledger.ManagedLedger) (*MLLog, error) {
	cur, err := ml.OpenCursor(ctx, LogCursor, managedledger.CursorOptions{Initial: managedledger.Earliest})
	if err != nil {
		return nil, fmt.Errorf("transaction log %s: open cursor: %w", ml.Name(), err)
	}
	return &MLLog{ml: ml, cursor: cur}, nil
}

// Append implements Log.
func (l *MLLog) Append(rec []byte, cb func(managedledger.Position, error)) { l.ml.AddEntry(rec, cb) }

// Replay implements Log: every record after the trim point.
func (l *MLLog) Replay(ctx context.Context, fn func(managedledger.Position, []byte) error) error {
	l.cursor.Rewind()
	for l.cursor.ReadPosition().Compare(l.ml.LastConfirmed()) <= 0 {
		entries, err := l.cursor.ReadEntries(ctx, 1000, 16<<20)
		if err != nil {
			return fmt.Errorf("transaction log %s: read: %w", l.ml.Name(), err)
		}
		if len(entries) == 0 {
			break
		}
		for _, e := range entries {
			if err := fn(e.Position, e.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// Trim implements Log.
func (l *MLLog) Trim(ctx context.Context, before managedledger.Position) error {
	if before.EntryID == 0 {
		return nil // its predecessor is in an earlier ledger: trimmed next time
	}
	prev := managedledger.Position{LedgerID: before.LedgerID, EntryID: before.EntryID - 1}
	if prev.Compare(l.cursor.MarkDeletePosition()) <= 0 {
		return nil
	}
	return l.cursor.MarkDelete(ctx, prev)
}

// SavedSequence implements Log.
func (l *MLLog) SavedSequence() uint64 {
	v, _ := strconv.ParseUint(l.ml.Properties()[sequenceProperty], 10, 64)
	return v
}

// SaveSequence implements Log.
func (l *MLLog) SaveSequence(ctx context.Context, seq uint64) error {
	return l.ml.UpdateProperties(ctx, map[string]string{sequenceProperty: strconv.FormatUint(seq, 10)}, nil)
}

// MemoryLog is a Log in memory, with failures to inject (tests).
type MemoryLog struct {
	mu   sync.Mutex
	recs []memRecord
	next int64
	seq  uint64
	// FailAppends makes appends fail (while set) with this error.
	FailAppends error
}

type memRecord struct {
	pos managedledger.Position
	rec []byte
}

// Append implements Log.
func (l *MemoryLog) Append(rec []byte, cb func(managedledger.Position, error)) {
	l.mu.Lock()
	if err := l.FailAppends; err != nil {
		l.mu.Unlock()
		cb(managedledger.Position{}, err)
		return
	}
	pos := managedledger.Position{LedgerID: 1, EntryID: l.next}
	l.next++
	l.recs = append(l.recs, memRecord{pos, append([]byte(nil), rec...)})
	l.mu.Unlock()
	cb(pos, nil)
}

// Replay implements Log.
func (l *MemoryLog) Replay(ctx context.Context, fn func(managedledger.Position, []byte) error) error {
	l.mu.Lock()
	recs := append([]memRecord(nil), l.recs...)
	l.mu.Unlock()
	for _, r := range recs {
		if err := fn(r.pos, r.rec); err != nil {
			return err
		}
	}
	return nil
}

// Trim implements Log.
func (l *MemoryLog) Trim(ctx context.Context, before managedledger.Position) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i < len(l.recs) && l.recs[i].pos.Compare(before) < 0 {
		i++
	}
	l.recs = l.recs[i:]
	return nil
}

// Len is how many records the log keeps.
func (l *MemoryLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// SavedSequence implements Log.
func (l *MemoryLog) SavedSequence() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// SaveSequence implements Log.
func (l *MemoryLog) SaveSequence(ctx context.Context, seq uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq = seq
	return nil
}

// SetFail sets FailAppends under the log's lock.
func (l *MemoryLog) SetFail(err error) {
	l.mu.Lock()
	l.FailAppends = err
	l.mu.Unlock()
}
