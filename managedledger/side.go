package managedledger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/magnetar-io/magnetar/ledger"
)

// SideLedgers stores ledgers that belong to a managed ledger without being
// part of its stream: a compacted topic's compacted ledger (Pulsar writes
// it to BookKeeper beside the topic's own ledgers, and names it in the
// compaction cursor's properties). The owner keeps the ids; the factory
// only creates, reads and deletes them.
type SideLedgers interface {
	// CreateSideLedger starts a ledger for owner (a managed-ledger name:
	// its persistence policy places it), written once and closed.
	CreateSideLedger(ctx context.Context, owner string) (SideWriter, error)
	// OpenSideLedger opens a closed side ledger for reading.
	OpenSideLedger(ctx context.Context, id int64) (SideReader, error)
	// DeleteSideLedger deletes it; nil if it is already gone.
	DeleteSideLedger(ctx context.Context, id int64) error
}

// SideWriter writes one side ledger, entry ids from 0.
type SideWriter interface {
	ID() int64
	// Append queues data (kept until written; the caller must not change
	// it). At most sideWindow appends are in flight: Append waits for
	// room. An error of an earlier append is returned by Append or Close.
	Append(ctx context.Context, data []byte) error
	// Close waits for every append and closes the ledger: its entries
	// are final once Close returned nil.
	Close(ctx context.Context) error
}

// SideReader reads a closed side ledger.
type SideReader interface {
	LastEntryID() int64
	// Read returns entries first..last (inclusive).
	Read(ctx context.Context, first, last int64) ([][]byte, error)
}

var (
	_ SideLedgers = (*BKFactory)(nil)
	_ SideLedgers = (*MemoryFactory)(nil)
)

// sideWindow bounds a side writer's appends in flight: enough to keep
// the bookies' journals busy without holding a whole compacted topic in
// memory.
const sideWindow = 256

// CreateSideLedger implements SideLedgers.
func (f *BKFactory) CreateSideLedger(ctx context.Context, owner string) (SideWriter, error) {
	opts, err := f.cfg.ledgerOptions(ctx, owner,
		map[string][]byte{"pulsar/managed-ledger": []byte(owner), "pulsar/side-ledger": []byte("compacted"), "application": []byte("pulsar")})
	if err != nil {
		return nil, fmt.Errorf("managedledger %s: side ledger: %w", owner, err)
	}
	w, err := f.cfg.Ledgers.Create(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("managedledger %s: create side ledger: %w", owner, err)
	}
	return &bkSideWriter{w: w, slots: make(chan struct{}, sideWindow)}, nil
}

// OpenSideLedger implements SideLedgers.
func (f *BKFactory) OpenSideLedger(ctx context.Context, id int64) (SideReader, error) {
	r, err := f.cfg.Ledgers.OpenNoRecovery(ctx, id, f.cfg.Password)
	if err != nil {
		return nil, fmt.Errorf("open side ledger %d: %w", id, err)
	}
	return bkSideReader{r}, nil
}

// DeleteSideLedger implements SideLedgers.
func (f *BKFactory) DeleteSideLedger(ctx context.Context, id int64) error {
	if err := f.cfg.Ledgers.Delete(ctx, id); err != nil && !errors.Is(err, ledger.ErrNoSuchLedger) {
		return fmt.Errorf("delete side ledger %d: %w", id, err)
	}
	return nil
}

// bkSideWriter pipelines appends: slots holds one token per append in
// flight; mu guards the first error.
type bkSideWriter struct {
	w     *ledger.WriteHandle
	slots chan struct{}
	mu    sync.Mutex
	err   error
}

func (s *bkSideWriter) ID() int64 { return s.w.ID() }

func (s *bkSideWriter) Append(ctx context.Context, data []byte) error {
	if err := s.firstErr(); err != nil {
		return err
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.w.AppendAsync(data, func(_ int64, err error) {
		if err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = fmt.Errorf("side ledger %d: append: %w", s.w.ID(), err)
			}
			s.mu.Unlock()
		}
		<-s.slots
	})
	return nil
}

func (s *bkSideWriter) firstErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *bkSideWriter) Close(ctx context.Context) error {
	for range sideWindow { // every slot back: every append called back
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := s.firstErr(); err != nil {
		_ = s.w.Close(ctx)
		return err
	}
	if err := s.w.Close(ctx); err != nil {
		return fmt.Errorf("side ledger %d: close: %w", s.w.ID(), err)
	}
	return nil
}

type bkSideReader struct{ r *ledger.ReadHandle }

func (s bkSideReader) LastEntryID() int64 { return s.r.LastAddConfirmed() }

func (s bkSideReader) Read(ctx context.Context, first, last int64) ([][]byte, error) {
	entries, err := s.r.Read(ctx, first, last)
	if err != nil {
		return nil, fmt.Errorf("side ledger %d: read %d..%d: %w", s.r.ID(), first, last, err)
	}
	out := make([][]byte, len(entries))
	for i, e := range entries {
		out[i] = e.Payload
	}
	return out, nil
}

// memorySide is the in-memory factory's side ledgers: closed ones only
// are readable, as on bookies.
type memorySide struct {
	mu      sync.Mutex
	next    int64
	ledgers map[int64]*memorySideLedger
}

type memorySideLedger struct {
	entries [][]byte
	closed  bool
}

// CreateSideLedger implements SideLedgers.
func (f *MemoryFactory) CreateSideLedger(ctx context.Context, owner string) (SideWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &f.side
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ledgers == nil {
		s.ledgers, s.next = map[int64]*memorySideLedger{}, 1<<32 // apart from stream ledger ids
	}
	id := s.next
	s.next++
	s.ledgers[id] = &memorySideLedger{}
	return &memorySideWriter{s: s, id: id}, nil
}

// OpenSideLedger implements SideLedgers.
func (f *MemoryFactory) OpenSideLedger(_ context.Context, id int64) (SideReader, error) {
	f.side.mu.Lock()
	defer f.side.mu.Unlock()
	l, ok := f.side.ledgers[id]
	if !ok || !l.closed {
		return nil, fmt.Errorf("open side ledger %d: %w", id, ledger.ErrNoSuchLedger)
	}
	return memorySideReader{entries: l.entries}, nil
}

// DeleteSideLedger implements SideLedgers.
func (f *MemoryFactory) DeleteSideLedger(_ context.Context, id int64) error {
	f.side.mu.Lock()
	defer f.side.mu.Unlock()
	delete(f.side.ledgers, id)
	return nil
}

type memorySideWriter struct {
	s  *memorySide
	id int64
}

func (w *memorySideWriter) ID() int64 { return w.id }

func (w *memorySideWriter) Append(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	l, ok := w.s.ledgers[w.id]
	if !ok || l.closed {
		return fmt.Errorf("side ledger %d: append: %w", w.id, ledger.ErrNoSuchLedger)
	}
	l.entries = append(l.entries, data)
	return nil
}

func (w *memorySideWriter) Close(context.Context) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if l, ok := w.s.ledgers[w.id]; ok {
		l.closed = true
	}
	return nil
}

type memorySideReader struct{ entries [][]byte }

func (r memorySideReader) LastEntryID() int64 { return int64(len(r.entries)) - 1 }

func (r memorySideReader) Read(_ context.Context, first, last int64) ([][]byte, error) {
	if first < 0 || last >= int64(len(r.entries)) || first > last {
		return nil, fmt.Errorf("side ledger: read %d..%d of %d entries: %w", first, last, len(r.entries), ErrInvalidPosition)
	}
	return append([][]byte(nil), r.entries[first:last+1]...), nil
}
