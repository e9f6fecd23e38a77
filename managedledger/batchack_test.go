package managedledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// batchImpls opens a managed ledger of each implementation with two
// entries per ledger (trimming held off on the ledger-backed one, where it
// runs in the background).
func batchImpls(t *testing.T) map[string]func(t *testing.T) ManagedLedger {
	return map[string]func(t *testing.T) ManagedLedger{
		"memory": func(t *testing.T) ManagedLedger {
			ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 2}).Open(context.Background(), "public/default/persistent/batch")
			return ml
		},
		"bookie": func(t *testing.T) ManagedLedger {
			f := newBKEnv(t).factory(t, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond, Retention: Retention{Time: -1, Size: -1}})
			ml, err := f.Open(context.Background(), "public/default/persistent/batch")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ml.Close(context.Background()) })
			return ml
		},
	}
}

// TestBatchAck: the rules of AckBatchIndexes and BatchAckSet, on both
// implementations, each case over six entries (three ledgers).
func TestBatchAck(t *testing.T) {
	ctx := context.Background()
	type env struct {
		t   *testing.T
		c   Cursor
		pos []Position
	}
	ack := func(e env, k int, set []uint64, cumulative bool) {
		e.t.Helper()
		if err := e.c.AckBatchIndexes(ctx, e.pos[k], set, cumulative); err != nil {
			e.t.Fatalf("ack %v %x: %v", e.pos[k], set, err)
		}
	}
	want := func(e env, k int, bits []uint64, acked bool, backlog int64) {
		e.t.Helper()
		if got := e.c.BatchAckSet(e.pos[k]); !slices.Equal(got, bits) || (got == nil) != (bits == nil) {
			e.t.Fatalf("BatchAckSet(%v) = %x, want %x", e.pos[k], got, bits)
		}
		if got := e.c.IsAcknowledged(e.pos[k]); got != acked {
			e.t.Fatalf("IsAcknowledged(%v) = %v, want %v", e.pos[k], got, acked)
		}
		if got := e.c.Backlog(); got != backlog {
			e.t.Fatalf("backlog %d, want %d", got, backlog)
		}
	}
	cases := []struct {
		name string
		run  func(e env)
	}{
		{"ANDs the sets", func(e env) {
			ack(e, 2, []uint64{0b1110}, false)
			ack(e, 2, []uint64{0b1011}, false)
			want(e, 2, []uint64{0b1010}, false, 6)
		}},
		{"a shorter set clears the words past it", func(e env) {
			ack(e, 2, []uint64{^uint64(0), 0b11}, false)
			ack(e, 2, []uint64{^uint64(1)}, false)
			want(e, 2, []uint64{^uint64(1)}, false, 6)
		}},
		{"trailing zero words are dropped", func(e env) {
			ack(e, 2, []uint64{0b1, 0}, false)
			want(e, 2, []uint64{0b1}, false, 6)
		}},
		{"the last bits acknowledge the entry", func(e env) {
			ack(e, 2, []uint64{0b11}, false)
			ack(e, 2, []uint64{0b01}, false)
			ack(e, 2, []uint64{0b10}, false)
			want(e, 2, nil, true, 5)
		}},
		{"an empty set acknowledges the entry", func(e env) {
			ack(e, 1, nil, false)
			ack(e, 3, []uint64{0, 0}, false)
			want(e, 1, nil, true, 4)
			want(e, 3, nil, true, 4)
		}},
		{"fully acked first entry moves mark-delete", func(e env) {
			ack(e, 0, []uint64{0b10}, false)
			ack(e, 0, []uint64{0b01}, false)
			if md := e.c.MarkDeletePosition(); md != e.pos[0] {
				e.t.Fatalf("mark-delete %v, want %v", md, e.pos[0])
			}
		}},
		{"cumulative with an ack set", func(e env) {
			ack(e, 1, []uint64{0b111}, false)
			ack(e, 3, []uint64{0b101}, true)
			want(e, 3, []uint64{0b101}, false, 3)
			want(e, 1, nil, true, 3) // acknowledged: its set went
			if md := e.c.MarkDeletePosition(); md != e.pos[2] {
				e.t.Fatalf("mark-delete %v, want %v", md, e.pos[2])
			}
			ack(e, 3, []uint64{0b100}, true) // ANDed again, mark-delete stays
			want(e, 3, []uint64{0b100}, false, 3)
			ack(e, 3, nil, true)
			want(e, 3, nil, true, 2)
		}},
		{"cumulative on an acked entry folds it", func(e env) {
			if err := e.c.Delete(ctx, e.pos[3]); err != nil {
				e.t.Fatal(err)
			}
			ack(e, 3, []uint64{0b1}, true)
			want(e, 3, nil, true, 2)
			if md := e.c.MarkDeletePosition(); md != e.pos[3] {
				e.t.Fatalf("mark-delete %v, want %v", md, e.pos[3])
			}
		}},
		{"no-op at or before mark-delete, or individually acked", func(e env) {
			if err := e.c.MarkDelete(ctx, e.pos[1]); err != nil {
				e.t.Fatal(err)
			}
			if err := e.c.Delete(ctx, e.pos[4]); err != nil {
				e.t.Fatal(err)
			}
			ack(e, 1, []uint64{0b1}, false)
			ack(e, 4, []uint64{0b1}, false)
			ack(e, 0, []uint64{0b1}, true)
			want(e, 1, nil, true, 3)
			want(e, 4, nil, true, 3)
		}},
		{"dropped by mark-delete", func(e env) {
			ack(e, 2, []uint64{0b1}, false)
			ack(e, 4, []uint64{0b1}, false)
			if err := e.c.MarkDelete(ctx, e.pos[2]); err != nil {
				e.t.Fatal(err)
			}
			want(e, 2, nil, true, 3)
			want(e, 4, []uint64{0b1}, false, 3)
		}},
		{"dropped by delete", func(e env) {
			ack(e, 2, []uint64{0b1}, false)
			if err := e.c.Delete(ctx, e.pos[2]); err != nil {
				e.t.Fatal(err)
			}
			want(e, 2, nil, true, 5)
		}},
		{"dropped by skip and clear", func(e env) {
			ack(e, 1, []uint64{0b1}, false)
			ack(e, 4, []uint64{0b1}, false)
			if err := e.c.SkipEntries(ctx, 2); err != nil {
				e.t.Fatal(err)
			}
			want(e, 1, nil, true, 4)
			want(e, 4, []uint64{0b1}, false, 4)
			if err := e.c.ClearBacklog(ctx); err != nil {
				e.t.Fatal(err)
			}
			want(e, 4, nil, true, 0)
		}},
		{"dropped by reset, also backwards", func(e env) {
			ack(e, 3, []uint64{0b1}, false)
			ack(e, 5, []uint64{0b1}, false)
			if err := e.c.Reset(ctx, e.pos[2]); err != nil {
				e.t.Fatal(err)
			}
			want(e, 3, nil, false, 4)
			want(e, 5, nil, false, 4)
		}},
		{"sets are copies", func(e env) {
			set := []uint64{0b11}
			ack(e, 2, set, false)
			set[0] = 0
			got := e.c.BatchAckSet(e.pos[2])
			got[0] = 0
			want(e, 2, []uint64{0b11}, false, 6)
		}},
		{"errors", func(e env) {
			past := Position{e.pos[5].LedgerID + 10, 0}
			if err := e.c.AckBatchIndexes(ctx, past, []uint64{1}, false); !errors.Is(err, ErrInvalidPosition) {
				e.t.Fatalf("ack past the last entry: %v", err)
			}
			if err := e.c.AckBatchIndexes(ctx, e.pos[2], make([]uint64, maxAckSetWords+1), false); !errors.Is(err, ErrInvalidAckSet) {
				e.t.Fatalf("ack set over the limit: %v", err)
			}
			want(e, 2, nil, false, 6)
			if got := e.c.BatchAckSet(past); got != nil {
				e.t.Fatalf("BatchAckSet past the end: %x", got)
			}
		}},
	}
	for kind, open := range batchImpls(t) {
		t.Run(kind, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ml := open(t)
					c, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
					if err != nil {
						t.Fatal(err)
					}
					var pos []Position
					for i := range 6 {
						pos = append(pos, addWait(t, ml, fmt.Sprintf("m%d", i)))
					}
					tc.run(env{t, c, pos})
				})
			}
		})
	}
}

// TestBKBatchAckPersists: batch sets survive a close and a bookie crash,
// and the throttled persistence writes them without a close (a takeover
// recovers them from the cursor ledger).
func TestBKBatchAckPersists(t *testing.T) {
	env := newBKEnvWith(t, true)
	ctx := context.Background()
	name := "public/default/persistent/batch-persist"
	cfg := Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond, Retention: Retention{Time: -1, Size: -1}}
	ml, err := env.factory(t, cfg).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var pos []Position
	for i := range 6 {
		pos = append(pos, addWait(t, ml, fmt.Sprintf("m%d", i)))
	}
	acks := []struct {
		k          int
		set        []uint64
		cumulative bool
	}{
		{2, []uint64{0b1011, 1}, true}, // mark-delete to pos[1]
		{2, []uint64{0b1110, 1}, false},
		{4, []uint64{0b1}, false},
		{5, []uint64{0b1}, false},
		{5, nil, false}, // fully acknowledged
	}
	for _, a := range acks {
		if err := c.AckBatchIndexes(ctx, pos[a.k], a.set, a.cumulative); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, c Cursor) {
		t.Helper()
		if md := c.MarkDeletePosition(); md != pos[1] {
			t.Fatalf("%s: mark-delete %v, want %v", what, md, pos[1])
		}
		want := map[int][]uint64{2: {0b1010, 1}, 4: {0b1}}
		for k, p := range pos {
			if got := c.BatchAckSet(p); fmt.Sprint(got) != fmt.Sprint(want[k]) {
				t.Fatalf("%s: BatchAckSet(%v) = %x, want %x", what, p, got, want[k])
			}
		}
		if !c.IsAcknowledged(pos[5]) || c.Backlog() != 3 {
			t.Fatalf("%s: pos[5] acked %v, backlog %d, want true and 3", what, c.IsAcknowledged(pos[5]), c.Backlog())
		}
	}
	check("before close", c)
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	env.stopBookie()
	env.startBookie()
	ml2, err := env.factory(t, cfg).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := ml2.OpenCursor(ctx, "sub", CursorOptions{})
	check("after close and crash", c2)

	// A change is persisted by the throttled writer, as Delete's is.
	if err := c2.AckBatchIndexes(ctx, pos[4], []uint64{0b1, 0b1}, false); err != nil { // no change: still 0b1
		t.Fatal(err)
	}
	if err := c2.AckBatchIndexes(ctx, pos[2], []uint64{0b1000, 1}, false); err != nil {
		t.Fatal(err)
	}
	waitPersisted(t, c2.(*bkCursor))
	ml3, err := env.factory(t, cfg).Open(ctx, name) // a takeover: the cursor comes from its ledger
	if err != nil {
		t.Fatal(err)
	}
	c3, _ := ml3.OpenCursor(ctx, "sub", CursorOptions{})
	if got := c3.BatchAckSet(pos[2]); fmt.Sprint(got) != fmt.Sprint([]uint64{0b1000, 1}) {
		t.Fatalf("after a takeover: BatchAckSet(%v) = %x, want [8 1]", pos[2], got)
	}
}

// waitPersisted waits until the cursor's state was written.
func waitPersisted(t *testing.T, c *bkCursor) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c.persistMu.Lock() // no write in flight (lock order: persistMu, mu)
		c.ml.mu.Lock()
		dirty := c.dirty
		c.ml.mu.Unlock()
		c.persistMu.Unlock()
		if !dirty {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("cursor never persisted")
		}
	}
}

// testCursor is a bkCursor over one ledger of a huge number of entries,
// for snapshot tests without a bookie.
func testCursor() *bkCursor {
	ml := &bkLedger{}
	ml.mu.ledgers = []*ledgerInfo{{meta: ledgerMeta{ID: 7, Entries: 1 << 40}}}
	return &bkCursor{ml: ml, ackState: ackState{markDelete: -1}}
}

// TestBatchSnapshotFormat: the JSON field (golden), bounds, and that a
// snapshot without it (written before batch acks) still restores.
func TestBatchSnapshotFormat(t *testing.T) {
	c := testCursor()
	c.markDelete = 3
	c.andAckSet(5, []uint64{0b101})
	c.andAckSet(9, []uint64{1, 1 << 63})
	b, err := json.Marshal(c.snapshotLocked())
	if err != nil {
		t.Fatal(err)
	}
	golden := `{"markDelete":{"LedgerID":7,"EntryID":3},"batchDeletedIndexes":[{"ledgerId":7,"entryId":5,"ackSet":[5]},{"ledgerId":7,"entryId":9,"ackSet":[1,9223372036854775808]}]}`
	if string(b) != golden {
		t.Fatalf("snapshot\n%s\nwant\n%s", b, golden)
	}
	var s cursorSnapshot
	if err := json.Unmarshal([]byte(`{"markDelete":{"LedgerID":7,"EntryID":3},"individuallyDeleted":[[{"LedgerID":7,"EntryID":5},{"LedgerID":7,"EntryID":6}]]}`), &s); err != nil {
		t.Fatal(err)
	}
	old := testCursor()
	old.restoreLocked(s)
	if old.markDelete != 3 || len(old.acked) != 1 || old.batch != nil {
		t.Fatalf("old snapshot restored as mark-delete %d, acked %v, batch %v", old.markDelete, old.acked, old.batch)
	}

	big := testCursor()
	for i := range int64(maxPersistedBatchSets + 5) {
		big.andAckSet(i*2, []uint64{1})
	}
	if got := len(big.snapshotLocked().Batch); got != maxPersistedBatchSets {
		t.Fatalf("snapshot kept %d sets, want %d", got, maxPersistedBatchSets)
	}
	wide := testCursor()
	for i := range int64(10) {
		wide.andAckSet(i, slices.Repeat([]uint64{1}, maxAckSetWords))
	}
	snap := wide.snapshotLocked()
	if words := len(snap.Batch) * maxAckSetWords; words > maxPersistedBatchWords || len(snap.Batch) == 0 {
		t.Fatalf("snapshot kept %d sets of %d words, over the bound of %d", len(snap.Batch), maxAckSetWords, maxPersistedBatchWords)
	}
	back := testCursor()
	back.restoreLocked(big.snapshotLocked())
	if len(back.batch) != maxPersistedBatchSets || back.batch[0].index != 0 || back.batch[len(back.batch)-1].index != 2*(maxPersistedBatchSets-1) {
		t.Fatalf("restored %d sets", len(back.batch))
	}
}

// checkBatchInvariant fails unless every batch set is sorted, after the
// mark-delete position, not acknowledged, non-empty, without trailing
// zero words, and within maxAckSetWords.
func checkBatchInvariant(t interface{ Fatalf(string, ...any) }, s *ackState) {
	for k, b := range s.batch {
		switch {
		case k > 0 && s.batch[k-1].index >= b.index:
			t.Fatalf("batch sets out of order at %d: %v", k, s.batch)
		case s.isAcked(b.index):
			t.Fatalf("set of acknowledged index %d kept (mark-delete %d, acked %v)", b.index, s.markDelete, s.acked)
		case len(b.bits) == 0 || b.bits[len(b.bits)-1] == 0 || len(b.bits) > maxAckSetWords:
			t.Fatalf("set of index %d is %x", b.index, b.bits)
		}
	}
}

// FuzzCursorSnapshot: any snapshot decodes without a panic into a state
// that keeps the invariants, and writing it and restoring that again
// gives the same state.
func FuzzCursorSnapshot(f *testing.F) {
	f.Add([]byte(`{"markDelete":{"LedgerID":7,"EntryID":3},"batchDeletedIndexes":[{"ledgerId":7,"entryId":5,"ackSet":[5]},{"ledgerId":7,"entryId":5,"ackSet":[4]}]}`))
	f.Add([]byte(`{"markDelete":{"LedgerID":7,"EntryID":3},"individuallyDeleted":[[{"LedgerID":7,"EntryID":5},{"LedgerID":7,"EntryID":9}]],"batchDeletedIndexes":[{"ledgerId":7,"entryId":6,"ackSet":[1]},{"ledgerId":7,"entryId":12,"ackSet":[0,0]},{"ledgerId":7,"entryId":2,"ackSet":[1]},{"ledgerId":8,"entryId":1,"ackSet":[1]}]}`))
	f.Add([]byte(`{"markDelete":{"LedgerID":7,"EntryID":-1},"batchDeletedIndexes":[{"ledgerId":7,"entryId":0,"ackSet":[18446744073709551615,0,3]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s cursorSnapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		c := testCursor()
		c.restoreLocked(s)
		checkBatchInvariant(t, &c.ackState)
		again := testCursor()
		again.restoreLocked(c.snapshotLocked())
		if fmt.Sprint(again.ackState) != fmt.Sprint(c.ackState) {
			t.Fatalf("restored %v, then %v", c.ackState, again.ackState)
		}
	})
}

// TestAckStateBatch: ackState's batch sets against a map model over
// random acknowledgements of every kind (many sets, dropped from the
// middle and from the front).
func TestAckStateBatch(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const end = 80
		var s ackState
		s.markDelete = -1
		model := map[int64][]uint64{}
		acked := func(i int64) bool { return s.isAcked(i) }
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			i := rapid.Int64Range(0, end-1).Draw(rt, "i")
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0, 1, 2:
				set := []uint64{rapid.Uint64Range(0, 15).Draw(rt, "set")}
				cumulative := rapid.Bool().Draw(rt, "cumulative")
				wasAcked := acked(i) // a cumulative ack acknowledges only what is before i
				s.ackBatchIndexes(i, set, cumulative)
				if !wasAcked {
					bits := set[0]
					if old, ok := model[i]; ok {
						bits &= old[0]
					}
					if bits == 0 {
						delete(model, i)
					} else {
						model[i] = []uint64{bits}
					}
				}
			case 3:
				if i > s.markDelete {
					s.addAcked(i)
					s.normalise()
				}
				delete(model, i)
			case 4:
				n := rapid.Int64Range(1, 10).Draw(rt, "n")
				s.addAckedRange(i, min(i+n-1, end-1))
				s.normalise()
			case 5:
				s.skip(rapid.Int64Range(0, 10).Draw(rt, "skip"), 0, end)
			case 6:
				if rapid.IntRange(0, 4).Draw(rt, "reset") == 0 {
					s.resetTo(i)
					clear(model)
				}
			}
			for k := range model {
				if acked(k) {
					delete(model, k)
				}
			}
			checkBatchInvariant(rt, &s)
			for k := int64(0); k < end; k++ {
				if got := s.batchBits(k); fmt.Sprint(got) != fmt.Sprint(model[k]) {
					rt.Fatalf("index %d: set %x, model %x (state %v)", k, got, model[k], s)
				}
			}
		}
	})
}
