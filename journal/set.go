package journal

import (
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Set is the journals of one bookie, one per journal directory (one per
// disk, journalDirectories), with ledgers spread over them by id. A
// ledger's entries always go to the same journal, so they stay in order;
// the mapping is ledgerID mod the number of directories, so changing the
// directory list moves ledgers between journals, which is safe only after
// a checkpoint covering everything (replay reads every directory anyway).
type Set struct {
	journals []*Journal
}

// OpenSet opens a journal in each directory, replaying each in turn.
func OpenSet(fs engine.FS, dirs []string, opts Options, replay func(Entry) error) (*Set, error) {
	if len(dirs) == 0 {
		return nil, errors.New("journal: no journal directories configured")
	}
	s := &Set{}
	for _, d := range dirs {
		j, err := Open(fs, d, opts, replay)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("journal set: %w", err)
		}
		s.journals = append(s.journals, j)
	}
	return s, nil
}

// For returns the journal ledgerID is written to.
func (s *Set) For(ledgerID int64) *Journal {
	return s.journals[uint64(ledgerID)%uint64(len(s.journals))]
}

// Add adds an entry to its ledger's journal.
func (s *Set) Add(ledgerID, entryID int64, payload []byte, cb Callback) error {
	return s.For(ledgerID).Add(ledgerID, entryID, payload, cb)
}

// AddSummed is Journal.AddSummed on the ledger's journal.
func (s *Set) AddSummed(ledgerID, entryID int64, payload []byte, sum crc32c.Known, cb Callback) error {
	return s.For(ledgerID).AddSummed(ledgerID, entryID, payload, sum, cb)
}

// LastMarks returns each journal's last acknowledged mark, in directory
// order; ledger storage takes them before a flush and checkpoints them
// after it.
func (s *Set) LastMarks() []Mark {
	marks := make([]Mark, len(s.journals))
	for i, j := range s.journals {
		marks[i] = j.LastMark()
	}
	return marks
}

// Checkpoint checkpoints each journal at its mark (as LastMarks returned).
func (s *Set) Checkpoint(marks []Mark) error {
	if len(marks) != len(s.journals) {
		return fmt.Errorf("journal set: %d marks for %d journals", len(marks), len(s.journals))
	}
	var errs []error
	for i, j := range s.journals {
		errs = append(errs, j.Checkpoint(marks[i]))
	}
	return errors.Join(errs...)
}

// Close closes every journal.
func (s *Set) Close() error {
	var errs []error
	for _, j := range s.journals {
		if err := j.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
