package managedledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/magnetar-io/magnetar/ledger"
)

func add(t testing.TB, ml ManagedLedger, data string) Position {
	t.Helper()
	var pos Position
	var err error
	ml.AddEntry([]byte(data), func(p Position, e error) { pos, err = p, e })
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func TestPositionsRollOver(t *testing.T) {
	ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 3}).Open(context.Background(), "t")
	var got []string
	for i := 0; i < 7; i++ {
		got = append(got, add(t, ml, "x").String())
	}
	if fmt.Sprint(got) != "[1:0 1:1 1:2 2:0 2:1 2:2 3:0]" {
		t.Fatalf("positions %v", got)
	}
	if ml.LastConfirmed() != (Position{3, 0}) {
		t.Fatalf("last confirmed %v", ml.LastConfirmed())
	}
}

func TestEarliestAndLatestCursors(t *testing.T) {
	ctx := context.Background()
	ml, _ := NewMemoryFactory(MemoryOptions{}).Open(ctx, "t")
	add(t, ml, "a")
	add(t, ml, "b")
	early, _ := ml.OpenCursor(ctx, "early", CursorOptions{Initial: Earliest})
	late, _ := ml.OpenCursor(ctx, "late", CursorOptions{Initial: Latest})
	add(t, ml, "c")
	e, _ := early.ReadEntries(ctx, 10, 1<<20)
	l, _ := late.ReadEntries(ctx, 10, 1<<20)
	if len(e) != 3 || string(e[0].Data) != "a" || len(l) != 1 || string(l[0].Data) != "c" {
		t.Fatalf("earliest read %d, latest read %d", len(e), len(l))
	}
}

// A tailing read waits for the next add, without polling.
func TestReadOrWaitWakesOnAdd(t *testing.T) {
	ctx := context.Background()
	ml, _ := NewMemoryFactory(MemoryOptions{}).Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "s", CursorOptions{})
	got := make(chan []Entry, 1)
	c.ReadEntriesOrWait(10, 1<<20, func(e []Entry, err error) { got <- e })
	select {
	case <-got:
		t.Fatal("read returned with nothing to read")
	case <-time.After(20 * time.Millisecond):
	}
	start := time.Now()
	add(t, ml, "m")
	select {
	case e := <-got:
		if len(e) != 1 || string(e[0].Data) != "m" {
			t.Fatalf("woken with %v", e)
		}
		t.Logf("woken %s after the add", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("waiting read never woke")
	}
	c.ReadEntriesOrWait(10, 1<<20, func([]Entry, error) { t.Error("cancelled read called") })
	if !c.CancelPendingRead() {
		t.Fatal("nothing to cancel")
	}
	add(t, ml, "n")
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCloseFailsPendingRead(t *testing.T) {
	ctx := context.Background()
	ml, _ := NewMemoryFactory(MemoryOptions{}).Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "s", CursorOptions{})
	errc := make(chan error, 1)
	c.ReadEntriesOrWait(1, 1, func(_ []Entry, err error) { errc <- err })
	ml.Close(ctx)
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending read after close: %v", err)
	}
}

// Reset persists as the mark-delete position, not just the read position
// (Pulsar #18236): reopening the cursor reads from the reset point.
func TestResetMovesMarkDelete(t *testing.T) {
	ctx := context.Background()
	f := NewMemoryFactory(MemoryOptions{})
	ml, _ := f.Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	var ps []Position
	for i := 0; i < 5; i++ {
		ps = append(ps, add(t, ml, fmt.Sprint(i)))
	}
	if err := c.MarkDelete(ctx, ps[3]); err != nil {
		t.Fatal(err)
	}
	if err := c.Reset(ctx, ps[1]); err != nil {
		t.Fatal(err)
	}
	ml.Close(ctx)
	ml, _ = f.Open(ctx, "t")
	c, _ = ml.OpenCursor(ctx, "s", CursorOptions{})
	if c.MarkDeletePosition() != ps[0] || c.Backlog() != 4 {
		t.Fatalf("after reset to %v: mark-delete %v backlog %d", ps[1], c.MarkDeletePosition(), c.Backlog())
	}
}

// Ledgers every durable cursor consumed are dropped, whole.
func TestTrimWholeLedgers(t *testing.T) {
	ctx := context.Background()
	ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 2}).Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	var ps []Position
	for i := 0; i < 6; i++ {
		ps = append(ps, add(t, ml, "x"))
	}
	c.MarkDelete(ctx, ps[2]) // ledger 1 fully consumed, ledger 2 half
	if ml.Entries() != 4 {
		t.Fatalf("%d entries stored after consuming ledger 1", ml.Entries())
	}
	if c.Backlog() != 3 {
		t.Fatalf("backlog %d", c.Backlog())
	}
}

func TestConcurrentAddsAndTailingReads(t *testing.T) {
	ctx := context.Background()
	ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 100}).Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "s", CursorOptions{})
	const n = 2000
	var got []Entry
	done := make(chan struct{})
	var read func()
	read = func() {
		c.ReadEntriesOrWait(50, 1<<20, func(e []Entry, err error) {
			if err != nil {
				t.Error(err)
				close(done)
				return
			}
			got = append(got, e...)
			if len(got) == n {
				close(done)
				return
			}
			go read()
		})
	}
	read()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/4; i++ {
				ml.AddEntry([]byte{byte(w)}, func(Position, error) {})
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("read %d of %d", len(got), n)
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Position.Compare(got[j].Position) < 0 }) {
		t.Fatal("entries out of order")
	}
}

// TestCursorModel checks a cursor against a simple model over random
// sequences of add, read, individual ack, cumulative ack, rewind, seek,
// reset (forwards and backwards, within what is still stored) and batch
// acks (partial ack sets, individual and cumulative, some clearing every
// bit left).
func TestCursorModel(t *testing.T) {
	runCursorModel(t, func(rt *rapid.T) ManagedLedger {
		ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: int64(rapid.IntRange(1, 5).Draw(rt, "perLedger"))}).Open(context.Background(), "t")
		return ml
	}, nil)
}

// runCursorModel runs the model over managed ledgers from open. With
// reopen, some steps close the managed ledger and open it again (reopen
// returns the new instance): the cursor must come back with exactly the
// acknowledgements it had, reading from the first unacknowledged entry.
func runCursorModel(t *testing.T, open func(rt *rapid.T) ManagedLedger, reopen func(rt *rapid.T, closed ManagedLedger) ManagedLedger) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		ml := open(rt)
		defer func() { ml.Close(ctx) }()
		c, _ := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
		m := &cursorModel{acked: map[Position]bool{}, batch: map[Position][]uint64{}, size: map[Position]int{}}
		for step := 0; step < 60; step++ {
			if reopen != nil && rapid.IntRange(0, 9).Draw(rt, "reopen") == 0 {
				if err := ml.Close(ctx); err != nil {
					rt.Fatalf("close: %v", err)
				}
				ml = reopen(rt, ml)
				var err error
				if c, err = ml.OpenCursor(ctx, "s", CursorOptions{Initial: Latest}); err != nil {
					rt.Fatalf("reopen cursor: %v", err)
				}
				m.read = m.firstUnacked()
				m.check(rt, c)
			}
			m.step(rt, ml, c)
			m.check(rt, c)
		}
	})
}

type cursorModel struct {
	all   []Position
	acked map[Position]bool
	read  int // index into all of the next read
	// trimLedger: ledgers below it were dropped (whole ledgers every
	// durable cursor had consumed; the last entry is always kept).
	trimLedger int64
	// batch: the unacknowledged bits of partly acknowledged entries;
	// size: the message count of each entry batch-acked so far (drawn at
	// its first batch ack).
	batch map[Position][]uint64
	size  map[Position]int
}

// trimmed updates trimLedger as the implementation trims after acks.
func (m *cursorModel) trimmed() {
	if len(m.all) == 0 {
		return
	}
	keep := min(m.firstUnacked(), len(m.all)-1)
	m.trimLedger = max(m.trimLedger, m.all[keep].LedgerID)
}

func (m *cursorModel) firstUnacked() int {
	i := 0
	for i < len(m.all) && m.acked[m.all[i]] {
		i++
	}
	return i
}

func (m *cursorModel) step(rt *rapid.T, ml ManagedLedger, c Cursor) {
	ctx := context.Background()
	defer m.dropAckedBatches()
	switch rapid.IntRange(0, 8).Draw(rt, "op") {
	case 0, 1:
		m.all = append(m.all, addWait(rt, ml, "e"))
		m.trimmed() // an add that closes a ledger may trim the consumed ones
	case 2:
		n := rapid.IntRange(1, 4).Draw(rt, "n")
		got, _ := c.ReadEntries(ctx, n, 1<<20)
		var want []Position
		m.read = max(m.read, m.firstUnacked())
		for m.read < len(m.all) && len(want) < n {
			if !m.acked[m.all[m.read]] {
				want = append(want, m.all[m.read])
			}
			m.read++
		}
		if fmt.Sprint(positions(got)) != fmt.Sprint(want) {
			rt.Fatalf("read %v, model %v", positions(got), want)
		}
	case 3:
		if len(m.all) > 0 {
			p := m.all[rapid.IntRange(0, len(m.all)-1).Draw(rt, "ack")]
			c.Delete(ctx, p)
			m.acked[p] = true
			m.trimmed()
		}
	case 4:
		if len(m.all) > 0 {
			k := rapid.IntRange(0, len(m.all)-1).Draw(rt, "markDelete")
			c.MarkDelete(ctx, m.all[k])
			if k >= m.firstUnacked()-1 {
				for _, p := range m.all[:k+1] {
					m.acked[p] = true
				}
			}
			m.trimmed()
		}
	case 5:
		c.Rewind()
		m.read = m.firstUnacked()
	case 6:
		// Backwards too, but not into ledgers already trimmed (consumed
		// ledgers are dropped at once here; retention is the real
		// implementation's business).
		if first := m.firstStored(); first < len(m.all) {
			k := rapid.IntRange(first, len(m.all)-1).Draw(rt, "reset")
			c.Reset(ctx, m.all[k])
			m.acked, m.batch = map[Position]bool{}, map[Position][]uint64{}
			for _, p := range m.all[:k] {
				m.acked[p] = true
			}
			m.read = k
		}
	case 7:
		// Seek moves the read position, never before the first unacked.
		if len(m.all) > 0 {
			k := rapid.IntRange(0, len(m.all)-1).Draw(rt, "seek")
			c.Seek(m.all[k])
			m.read = max(k, m.firstUnacked())
		}
	case 8:
		if len(m.all) > 0 {
			k := rapid.IntRange(0, len(m.all)-1).Draw(rt, "batchAck")
			set := m.drawAckSet(rt, m.all[k])
			cumulative := rapid.IntRange(0, 3).Draw(rt, "cumulative") == 0
			if err := c.AckBatchIndexes(ctx, m.all[k], set, cumulative); err != nil {
				rt.Fatalf("batch ack of %v: %v", m.all[k], err)
			}
			m.ackBatch(k, set, cumulative)
			m.trimmed()
		}
	}
}

// drawAckSet draws an ack set for the batch entry at p (its size is
// drawn once): mostly all but a few messages unacknowledged, sometimes
// random bits, sometimes no bit (every message acknowledged).
func (m *cursorModel) drawAckSet(rt *rapid.T, p Position) []uint64 {
	n, ok := m.size[p]
	if !ok {
		n = rapid.IntRange(1, 130).Draw(rt, "batchSize")
		m.size[p] = n
	}
	set := make([]uint64, (n+63)/64)
	switch rapid.IntRange(0, 5).Draw(rt, "setKind") {
	case 0:
		return set // clears every bit left
	case 1:
		for j := range set {
			set[j] = rapid.Uint64().Draw(rt, "bits")
		}
	default:
		for j := range set {
			set[j] = ^uint64(0)
		}
		for range rapid.IntRange(1, 3).Draw(rt, "acks") {
			b := rapid.IntRange(0, n-1).Draw(rt, "msg")
			set[b/64] &^= 1 << (b % 64)
		}
	}
	if n%64 != 0 { // no bits past the batch's messages, as a client sends
		set[len(set)-1] &= 1<<(n%64) - 1
	}
	return set
}

// ackBatch is AckBatchIndexes in the model.
func (m *cursorModel) ackBatch(k int, set []uint64, cumulative bool) {
	if cumulative {
		for _, p := range m.all[:k] {
			m.acked[p] = true
		}
	}
	p := m.all[k]
	if m.acked[p] {
		return
	}
	bits := append([]uint64(nil), set...)
	if old, ok := m.batch[p]; ok {
		bits = bits[:min(len(bits), len(old))]
		for j := range bits {
			bits[j] &= old[j]
		}
	}
	for len(bits) > 0 && bits[len(bits)-1] == 0 {
		bits = bits[:len(bits)-1]
	}
	if len(bits) == 0 {
		m.acked[p] = true
		delete(m.batch, p)
		return
	}
	m.batch[p] = bits
}

// dropAckedBatches: an entry acknowledged by any path keeps no ack set.
func (m *cursorModel) dropAckedBatches() {
	for p := range m.batch {
		if m.acked[p] {
			delete(m.batch, p)
		}
	}
}

// firstStored is the index of the first entry not trimmed.
func (m *cursorModel) firstStored() int {
	i := 0
	for i < len(m.all) && m.all[i].LedgerID < m.trimLedger {
		i++
	}
	return i
}

func (m *cursorModel) check(rt *rapid.T, c Cursor) {
	unacked := 0
	for _, p := range m.all {
		if !m.acked[p] {
			unacked++
		}
		if c.IsAcknowledged(p) != m.acked[p] {
			rt.Fatalf("IsAcknowledged(%v) = %v, model %v", p, c.IsAcknowledged(p), m.acked[p])
		}
		if got, want := c.BatchAckSet(p), m.batch[p]; !slices.Equal(got, want) || (got == nil) != (want == nil) {
			rt.Fatalf("BatchAckSet(%v) = %x, model %x", p, got, want)
		}
	}
	if c.Backlog() != int64(unacked) {
		rt.Fatalf("backlog %d, model %d", c.Backlog(), unacked)
	}
	if f := m.firstUnacked(); f > 0 && c.MarkDeletePosition() != m.all[f-1] {
		rt.Fatalf("mark-delete %v, model %v", c.MarkDeletePosition(), m.all[f-1])
	}
}

func positions(es []Entry) []Position {
	out := make([]Position, len(es))
	for i, e := range es {
		out[i] = e.Position
	}
	return out
}

// Opening a closed ledger again (a new owner) rewinds its cursors to the
// first unacknowledged entry: what the old owner read but did not get
// acknowledged is read again, as the ledger-backed cursors recover.
func TestReopenRereadsUnacknowledged(t *testing.T) {
	ctx := context.Background()
	f := NewMemoryFactory(MemoryOptions{})
	ml, _ := f.Open(ctx, "t")
	cur, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	first, second := add(t, ml, "a"), add(t, ml, "b")
	if _, err := cur.ReadEntries(ctx, 10, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := cur.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ml, _ = f.Open(ctx, "t")
	cur, _ = ml.OpenCursor(ctx, "s", CursorOptions{})
	got, err := cur.ReadEntries(ctx, 10, 1<<20)
	if err != nil || len(got) != 1 || got[0].Position != second {
		t.Fatalf("after reopening: %v %v; want only the unacknowledged %v", got, err, second)
	}
}

// TestMemoryHoldsOnlyWhatCursorsNeed: with the default ledger length
// (50,000 entries: gigabytes of batched messages) in-memory storage keeps
// at most a ledger's worth of bytes beyond what a cursor has not
// acknowledged or retention asks for: with no subscription, with one that
// acknowledges every entry, and with size retention; a subscription that
// acknowledges nothing keeps everything. (Rolling over by entries alone
// kept all 128 MiB in each case.)
func TestMemoryHoldsOnlyWhatCursorsNeed(t *testing.T) {
	ctx := context.Background()
	const entrySize, n = 16 << 10, 8192 // 128 MiB, two default ledgers' worth
	payload := string(make([]byte, entrySize))
	run := func(t *testing.T, setup func(ml ManagedLedger) func()) *memoryLedger {
		ml, _ := NewMemoryFactory(MemoryOptions{}).Open(ctx, "public/default/persistent/t")
		consume := setup(ml)
		for range n {
			addWait(t, ml, payload)
			consume()
		}
		return ml.(*memoryHandle).memoryLedger
	}
	atMost := func(t *testing.T, ml *memoryLedger, bytes int64) {
		t.Helper()
		if ml.Size() > bytes {
			t.Fatalf("%d MiB in %d entries stored after %d entries of %d bytes, want at most %d MiB", ml.Size()>>20, ml.Entries(), n, entrySize, bytes>>20)
		}
		if c := cap(ml.entries); c > 4*int(ml.Entries()) {
			t.Fatalf("the entry array has %d slots for %d stored entries", c, ml.Entries())
		}
	}
	t.Run("no subscription", func(t *testing.T) {
		ml := run(t, func(ManagedLedger) func() { return func() {} })
		atMost(t, ml, DefaultMemoryLedgerSize)
	})
	t.Run("acknowledging consumer", func(t *testing.T) {
		ml := run(t, func(ml ManagedLedger) func() {
			c, err := ml.OpenCursor(ctx, "sub", CursorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return func() {
				entries, err := c.ReadEntries(ctx, 100, 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if err := c.Delete(ctx, e.Position); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
		atMost(t, ml, DefaultMemoryLedgerSize)
	})
	t.Run("size retention", func(t *testing.T) {
		const retained = 80 << 20
		ml := run(t, func(ml ManagedLedger) func() {
			ml.SetRetention(Retention{Time: -1, Size: retained})
			return func() {}
		})
		atMost(t, ml, retained)
		if ml.Size() < retained-DefaultMemoryLedgerSize { // whole ledgers go
			t.Fatalf("size retention of %d MiB kept %d MiB", retained>>20, ml.Size()>>20)
		}
	})
	t.Run("subscription acknowledging nothing", func(t *testing.T) {
		ml := run(t, func(ml ManagedLedger) func() {
			if _, err := ml.OpenCursor(ctx, "sub", CursorOptions{}); err != nil {
				t.Fatal(err)
			}
			return func() {}
		})
		if ml.Size() != n*entrySize {
			t.Fatalf("%d bytes kept for a subscription that acknowledged nothing, want %d", ml.Size(), n*entrySize)
		}
	})
}

// A factory shared by several brokers (the in-process cluster tests) sees
// a new owner open a ledger the old one has not closed yet: a bundle is
// acquired elsewhere as soon as the old owner's session is gone, and the
// old owner closes its topics a little later. The old owner's close must
// not close the new owner's ledger, and its adds must fail as a fenced
// BookKeeper writer's do. (A cluster test once had a consumer refused
// "open cursor: managedledger: closed" for 45 s on the new owner.)
func TestMemoryNewOwnerSurvivesTheOldOwnersClose(t *testing.T) {
	ctx := context.Background()
	f := NewMemoryFactory(MemoryOptions{})
	a, b := f.Owner(), f.Owner()
	old, err := a.Open(ctx, "public/default/persistent/t")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.Open(ctx, "public/default/persistent/t"); err != nil || again != old {
		t.Fatalf("the same owner's second open: %v, %v; want its open handle", again, err)
	}
	if _, err := old.OpenCursor(ctx, "s", CursorOptions{}); err != nil {
		t.Fatal(err)
	}
	addWait(t, old, "before")
	oldCursor, err := old.OpenCursor(ctx, "s", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldReader, err := old.NewNonDurableCursor(Position{})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := b.Open(ctx, "public/default/persistent/t")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := owner.OpenCursor(ctx, "s", CursorOptions{})
	if err != nil {
		t.Fatalf("new owner's cursor after the old owner closed: %v", err)
	}
	addWait(t, owner, "after")
	if got := owner.Entries(); got != 2 {
		t.Fatalf("new owner sees %d entries, want 2", got)
	}
	es, err := c.ReadEntries(ctx, 10, 1<<20)
	if err != nil || len(es) != 2 {
		t.Fatalf("new owner's cursor read %d entries, %v: want both", len(es), err)
	}
	done := make(chan error, 1)
	old.AddEntry([]byte("stale"), func(_ Position, err error) { done <- err })
	if err := <-done; !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("old owner's add after the takeover: %v, want ErrFenced", err)
	}
	if got := owner.Entries(); got != 2 {
		t.Fatalf("after the old owner's add the new owner sees %d entries, want 2", got)
	}
	// The old owner's cursor is fenced: a late read, ack or cancel of its
	// cannot take the new owner's entries or pending read.
	waiting := make(chan error, 1)
	c.ReadEntriesOrWait(10, 1<<20, func(_ []Entry, err error) { waiting <- err })
	oldCursor.CancelPendingRead()
	if _, err := oldCursor.ReadEntries(ctx, 10, 1<<20); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("old owner's cursor read: %v, want ErrFenced", err)
	}
	if _, err := oldReader.ReadEntries(ctx, 10, 1<<20); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("old owner's reader: %v, want ErrFenced", err)
	}
	if err := oldCursor.MarkDelete(ctx, c.ReadPosition()); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("old owner's mark-delete: %v, want ErrFenced", err)
	}
	if _, err := old.OpenCursor(ctx, "s2", CursorOptions{}); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("old owner's new cursor: %v, want ErrFenced", err)
	}
	addWait(t, owner, "woken")
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("new owner's waiting read: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old owner's cancel dropped the new owner's waiting read")
	}
}
