package entrylog

import (
	"fmt"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Ledger state. Every change is written to the index at once without a
// sync; the next synced commit (a flush's, or the sync a Flush issues when
// there was nothing else to commit) makes it durable, as Pebble's log is
// written in order. Deletion is the exception: it is synced before
// DeleteLedger returns.

func noLedger(ledgerID int64) error { return fmt.Errorf("ledger %d: %w", ledgerID, ErrNoLedger) }

func (s *shard) setMasterKey(ledgerID int64, key []byte) error {
	if err := s.fail.check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.stateOrCreateLocked(ledgerID)
	if err != nil || st == nil || st.masterKey != nil {
		return err
	}
	st.masterKey = append([]byte{}, key...)
	return s.persistLocked(ledgerID, st)
}

// ensureLedger makes sure the ledger has state; false means it was deleted
// (the caller ignores the change, see "Deleted ledgers" in the package doc).
func (s *shard) ensureLedger(ledgerID int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ledgers[ledgerID] != nil {
		return true, nil
	}
	st, err := s.stateOrCreateLocked(ledgerID)
	if err != nil || st == nil {
		return false, err
	}
	return true, s.persistLocked(ledgerID, st)
}

// stateOrCreateLocked returns the ledger's state, creating an empty one (not
// yet persisted) for a new ledger; nil for a deleted one.
func (s *shard) stateOrCreateLocked(ledgerID int64) (*ledgerState, error) {
	if st := s.mu.ledgers[ledgerID]; st != nil {
		return st, nil
	}
	if _, ok := s.mu.deleting[ledgerID]; ok {
		return nil, nil
	}
	// A Pebble read under mu, but only when a ledger is first seen.
	_, dead, err := s.ix.get(ledgerKey(prefixTombstone, ledgerID))
	if err != nil || dead {
		return nil, err
	}
	st := &ledgerState{}
	s.mu.ledgers[ledgerID] = st
	return st, nil
}

// persistLocked writes the ledger's state (unsynced).
func (s *shard) persistLocked(ledgerID int64, st *ledgerState) error {
	b := s.ix.db.NewBatch()
	if err := b.Set(ledgerKey(prefixLedger, ledgerID), encodeState(st), nil); err != nil {
		return fmt.Errorf("ledger %d: %w", ledgerID, err)
	}
	if err := s.ix.commit(b, false); err != nil {
		return s.failed(fmt.Errorf("ledger %d: write state: %w", ledgerID, err))
	}
	s.mu.dirty = true
	return nil
}

func (s *shard) masterKey(ledgerID int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	if st == nil {
		return nil, noLedger(ledgerID)
	}
	return st.masterKey, nil
}

func (s *shard) setFenced(ledgerID int64) (bool, error) {
	if err := s.fail.check(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	if st == nil {
		return false, noLedger(ledgerID)
	}
	if st.fenced {
		return true, nil
	}
	st.fenced = true
	return false, s.persistLocked(ledgerID, st)
}

func (s *shard) isFenced(ledgerID int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	if st == nil {
		return false, noLedger(ledgerID)
	}
	return st.fenced, nil
}

func (s *shard) setExplicitLAC(ledgerID int64, lac []byte) error {
	if err := s.fail.check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	if st == nil {
		return noLedger(ledgerID)
	}
	// A new slice: readers may hold the old one.
	st.explicitLAC = append([]byte{}, lac...)
	return s.persistLocked(ledgerID, st)
}

func (s *shard) explicitLAC(ledgerID int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	if st == nil {
		return nil, noLedger(ledgerID)
	}
	return st.explicitLAC, nil
}

func (s *shard) hasLedger(ledgerID int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.ledgers[ledgerID] != nil
}

func (s *shard) addEntry(ledgerID, entryID int64, data []byte, sum crc32c.Known, keep bool) error {
	if err := s.fail.check(); err != nil {
		return err
	}
	live, err := s.ensureLedger(ledgerID)
	if err != nil || !live {
		return err
	}
	waited, err := s.wc.put(ledgerID, entryID, data, sum, keep)
	if waited {
		s.stats.throttledAdds.Add(1)
	}
	if err != nil {
		return fmt.Errorf("ledger %d entry %d: %w", ledgerID, entryID, err)
	}
	return nil
}

// deleteLedger drops the ledger's state and index entries and writes its
// tombstone, synced. Under indexMu, so no flush or compaction commit can
// put an entry of the ledger back between the removal and the commit.
func (s *shard) deleteLedger(ledgerID int64) error {
	if err := s.fail.check(); err != nil {
		return err
	}
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	s.mu.Lock()
	existed := s.mu.ledgers[ledgerID] != nil
	delete(s.mu.ledgers, ledgerID)
	s.mu.deleting[ledgerID] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.deleting, ledgerID)
		s.mu.Unlock()
	}()
	if !existed {
		_, dead, err := s.ix.get(ledgerKey(prefixTombstone, ledgerID))
		if err != nil || dead {
			return err
		}
	}
	b := s.ix.db.NewBatch()
	lower, upper := ledgerEntriesBounds(ledgerID)
	if err := firstErr(
		b.Set(ledgerKey(prefixTombstone, ledgerID), nil, nil),
		b.Delete(ledgerKey(prefixLedger, ledgerID), nil),
		b.DeleteRange(lower, upper, nil),
	); err != nil {
		return fmt.Errorf("ledger %d: delete: %w", ledgerID, err)
	}
	s.hook("delete:before-commit")
	if err := s.ix.commit(b, true); err != nil {
		return s.failed(fmt.Errorf("ledger %d: delete: %w", ledgerID, err))
	}
	s.hook("delete:committed")
	s.stats.ledgersDeleted.Add(1)
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
