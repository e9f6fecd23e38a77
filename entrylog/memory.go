package entrylog

import (
	"fmt"
	"sort"
	"sync"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Memory is a Storage held in memory, for tests of the layers above and for
// an all-in-memory standalone. Flush only completes checkpoints: nothing
// here survives the process.
type Memory struct {
	cp Checkpointer // may be nil

	mu struct {
		sync.Mutex
		closed  bool
		ledgers map[int64]*memLedger
		deleted map[int64]bool // tombstones: deleted ledgers never come back
	}
}

type memLedger struct {
	masterKey   []byte
	fenced      bool
	explicitLAC []byte
	entries     map[int64][]byte
	last        int64
}

// NewMemory returns an empty in-memory Storage. cp may be nil.
func NewMemory(cp Checkpointer) *Memory {
	m := &Memory{cp: cp}
	m.mu.ledgers = make(map[int64]*memLedger)
	m.mu.deleted = make(map[int64]bool)
	return m
}

// with runs fn on the ledger's state under mu. With create, a ledger
// without state gets it, and a deleted one is left alone (fn does not
// run: replayed or stale writes never revive it); without, a missing
// ledger is ErrNoLedger.
func (m *Memory) with(ledgerID int64, create bool, fn func(*memLedger) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	l := m.mu.ledgers[ledgerID]
	switch {
	case l != nil:
	case !create:
		return fmt.Errorf("ledger %d: %w", ledgerID, ErrNoLedger)
	case m.mu.deleted[ledgerID]:
		return nil
	default:
		l = &memLedger{entries: make(map[int64][]byte), last: -1}
		m.mu.ledgers[ledgerID] = l
	}
	return fn(l)
}

// SetMasterKey implements Storage.
func (m *Memory) SetMasterKey(ledgerID int64, key []byte) error {
	return m.with(ledgerID, true, func(l *memLedger) error {
		if l.masterKey == nil {
			l.masterKey = append([]byte{}, key...)
		}
		return nil
	})
}

// MasterKey implements Storage.
func (m *Memory) MasterKey(ledgerID int64) (key []byte, err error) {
	err = m.with(ledgerID, false, func(l *memLedger) error { key = l.masterKey; return nil })
	return key, err
}

// SetFenced implements Storage.
func (m *Memory) SetFenced(ledgerID int64) (was bool, err error) {
	err = m.with(ledgerID, false, func(l *memLedger) error { was, l.fenced = l.fenced, true; return nil })
	return was, err
}

// IsFenced implements Storage.
func (m *Memory) IsFenced(ledgerID int64) (fenced bool, err error) {
	err = m.with(ledgerID, false, func(l *memLedger) error { fenced = l.fenced; return nil })
	return fenced, err
}

// SetExplicitLAC implements Storage.
func (m *Memory) SetExplicitLAC(ledgerID int64, lac []byte) error {
	return m.with(ledgerID, false, func(l *memLedger) error { l.explicitLAC = append([]byte{}, lac...); return nil })
}

// ExplicitLAC implements Storage.
func (m *Memory) ExplicitLAC(ledgerID int64) (lac []byte, err error) {
	err = m.with(ledgerID, false, func(l *memLedger) error { lac = l.explicitLAC; return nil })
	return lac, err
}

// LedgerExists implements Storage.
func (m *Memory) LedgerExists(ledgerID int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return false, ErrClosed
	}
	return m.mu.ledgers[ledgerID] != nil, nil
}

// AddEntry implements Storage.
func (m *Memory) AddEntry(ledgerID, entryID int64, data []byte) error {
	return m.with(ledgerID, true, func(l *memLedger) error {
		l.entries[entryID] = append([]byte{}, data...)
		l.last = max(l.last, entryID)
		return nil
	})
}

// AddEntrySummed implements SummedAdder: memory keeps no checksums.
func (m *Memory) AddEntrySummed(ledgerID, entryID int64, data []byte, _ crc32c.Known) error {
	return m.AddEntry(ledgerID, entryID, data)
}

// ReadEntry implements Storage.
func (m *Memory) ReadEntry(ledgerID, entryID int64) (data []byte, err error) {
	err = m.with(ledgerID, false, func(l *memLedger) error {
		var ok bool
		if data, ok = l.entries[entryID]; !ok {
			return fmt.Errorf("ledger %d entry %d: %w", ledgerID, entryID, ErrNoEntry)
		}
		return nil
	})
	return data, err
}

// LastEntryID implements Storage.
func (m *Memory) LastEntryID(ledgerID int64) (last int64, err error) {
	err = m.with(ledgerID, false, func(l *memLedger) error {
		if last = l.last; last < 0 {
			return fmt.Errorf("ledger %d has no entries: %w", ledgerID, ErrNoEntry)
		}
		return nil
	})
	return last, err
}

// DeleteLedger implements Storage.
func (m *Memory) DeleteLedger(ledgerID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	delete(m.mu.ledgers, ledgerID)
	m.mu.deleted[ledgerID] = true
	return nil
}

// Ledgers implements Storage.
func (m *Memory) Ledgers(fn func(ledgerID int64) bool) error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	ids := make([]int64, 0, len(m.mu.ledgers))
	for id := range m.mu.ledgers {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if !fn(id) {
			break
		}
	}
	return nil
}

// Flush implements Storage: nothing to write, so it completes a checkpoint.
func (m *Memory) Flush() error {
	m.mu.Lock()
	closed := m.mu.closed
	m.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if m.cp == nil {
		return nil
	}
	return m.cp.CompleteCheckpoint(m.cp.StartCheckpoint())
}

// Close implements Storage.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	m.mu.closed = true
	return nil
}

var _ Storage = (*Memory)(nil)
