package managedledger

// Operations of the ledger-backed managed ledger interleaved with its
// rollovers, trims, closes and ownership changes (takeovers), and the
// test helpers they share (gateStore, slowStore, factoryOver).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// gateStore blocks the first Put on path after arm() until release.
type gateStore struct {
	metadata.Store
	path    string
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *gateStore) arm() {
	s.entered, s.release = make(chan struct{}), make(chan struct{})
	s.armed.Store(true)
}

func (s *gateStore) Put(ctx context.Context, path string, value []byte, version int64) (metadata.Stat, error) {
	if path == s.path && s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	return s.Store.Put(ctx, path, value, version)
}

// waitUntil polls cond until it holds, for at most 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s did not happen", what)
		}
	}
}

// cursorOf is the managed ledger's open cursor called name.
func cursorOf(t *testing.T, ml ManagedLedger, name string) *bkCursor {
	t.Helper()
	bl := ml.(*bkLedger)
	bl.mu.Lock()
	defer bl.mu.Unlock()
	c := bl.mu.cursors[name]
	if c == nil {
		t.Fatalf("%s: no cursor %s", bl.name, name)
	}
	return c
}

// waitPersistDone waits until the cursor has nothing left to persist or
// its managed ledger stopped (fenced or closed: a write failed for good),
// with no write in flight.
func waitPersistDone(t *testing.T, c *bkCursor) {
	t.Helper()
	waitUntil(t, "cursor "+c.name+" persisted", func() bool {
		c.persistMu.Lock() // no write in flight (lock order: persistMu, mu)
		defer c.persistMu.Unlock()
		c.ml.mu.Lock()
		defer c.ml.mu.Unlock()
		return !c.dirty || c.ml.mu.fenced != nil || c.ml.mu.closed
	})
}

// threeLedgersAndReader opens name (2 entries per ledger) with a durable
// cursor "sub" at the start, adds e0..e5 (ledgers [e0 e1] [e2 e3] [e4 e5]
// and an empty current one) and opens a reader from the first entry.
func threeLedgersAndReader(t *testing.T, f *BKFactory, name string) (ManagedLedger, Cursor, []Position, Cursor) {
	t.Helper()
	ctx := context.Background()
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var ps []Position
	for i := range 6 {
		ps = append(ps, addWait(t, ml, fmt.Sprintf("e%d", i)))
	}
	reader, err := ml.NewNonDurableCursor(Position{LedgerID: -1, EntryID: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ml, sub, ps, reader
}

// slowStore adds latency to reads, as a remote metadata store has.
type slowStore struct {
	metadata.Store
	delay time.Duration
}

func (s slowStore) Get(ctx context.Context, path string) ([]byte, metadata.Stat, error) {
	time.Sleep(s.delay)
	return s.Store.Get(ctx, path)
}

// factoryOver is bkEnv.factory with a transport of its own, and the
// managed ledgers' store optionally wrapped (the ledger client keeps the
// plain one).
func (e *bkEnv) factoryOver(t *testing.T, tr ledger.Transport, wrap func(metadata.Store) metadata.Store, cfg Config) (*BKFactory, *ledger.Client) {
	t.Helper()
	store := e.meta.NewSession()
	cl, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: tr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Ledgers, cfg.Logger = store, cl, quiet()
	if wrap != nil {
		cfg.Store = wrap(store)
	}
	if cfg.MarkDeleteRate == 0 {
		cfg.MarkDeleteRate = 50
	}
	f, err := NewBKFactory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); store.Close() })
	return f, cl
}

type addResult struct {
	p   Position
	err error
}

func addAsync(ml ManagedLedger, data string) <-chan addResult {
	ch := make(chan addResult, 1)
	ml.AddEntry([]byte(data), func(p Position, err error) { ch <- addResult{p, err} })
	return ch
}

func await(t *testing.T, ch <-chan addResult, what string) addResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the add callback never ran", what)
	}
	return addResult{}
}

// TestBKAddAfterFailedRollover: a write failure whose rollover
// fails (the failed ledger cannot be recovered yet) leaves the closed
// writer in place; the next add was appended to it and its callback never
// ran (the handle's delivery goroutine had ended), even once the bookie
// was back.
func TestBKAddAfterFailedRollover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	ml, err := f.Open(ctx, "public/default/persistent/review-failed-rollover")
	if err != nil {
		t.Fatal(err)
	}
	p0 := addWait(t, ml, "m0")
	down := ft.Inject(unreachable)
	if r := await(t, addAsync(ml, "m1"), "add while the bookie is down"); r.err == nil {
		t.Fatalf("add while the only bookie is unreachable succeeded at %v", r.p)
	}
	ft.Remove(down)
	ml.ResumeAdds() // a failed add stops adds (TestBKNoAddStoredAfterAFailedOne)
	r := await(t, addAsync(ml, "m2"), "add after the bookie came back")
	if r.err != nil {
		t.Fatalf("add after the bookie came back: %v", r.err)
	}
	c, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readAll(t, c)); got != "[m0 m2]" {
		t.Fatalf("stream %v (m0 at %v, m2 at %v)", got, p0, r.p)
	}
}

// TestBKTrimRacingRollover: trim and a rollover both
// compare-and-set the managed ledger's node from the version each read;
// the loser takes its own conflict for a takeover and fences the ledger.
func TestBKTrimRacingRollover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/review-trim-rollover"
	gate := &gateStore{path: mlPath(name)}
	f, _ := env.factoryOver(t, env.tr, func(s metadata.Store) metadata.Store { gate.Store = s; return gate },
		Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond})
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	addWait(t, ml, "e0")
	p1 := addWait(t, ml, "e1") // ledger 1 full: rolls over
	addWait(t, ml, "e2")       // the new ledger
	gate.arm()
	if err := c.MarkDelete(ctx, p1); err != nil { // ledger 1 consumed: trimmed next tick
		t.Fatal(err)
	}
	select {
	case <-gate.entered: // trim is writing the node
	case <-time.After(10 * time.Second):
		t.Fatal("trim never wrote the managed ledger's node")
	}
	r3 := addAsync(ml, "e3") // the current ledger is full: a rollover writes the node too
	bl := ml.(*bkLedger)
	waitUntil(t, "the rollover began", func() bool { bl.mu.Lock(); defer bl.mu.Unlock(); return bl.mu.rolling })
	close(gate.release)
	if r := await(t, r3, "e3"); r.err != nil {
		t.Fatalf("e3: %v", r.err)
	}
	// Both writes of the node are done (a conflict would have fenced the
	// ledger by then): the rollover ended and no node write holds metaMu.
	waitUntil(t, "the rollover ended", func() bool {
		bl.metaMu.Lock() // lock order: metaMu, mu
		defer bl.metaMu.Unlock()
		bl.mu.Lock()
		defer bl.mu.Unlock()
		return !bl.mu.rolling
	})
	if r := await(t, addAsync(ml, "e4"), "e4"); r.err != nil {
		t.Fatalf("after a trim raced a rollover, adds fail: %v", r.err)
	}
}

// TestBKConcurrentOpenOfOneName: two opens of one name on one factory (the
// broker's getTopic does that for concurrent lookups) both recover and
// start ledgers; one fails on the metadata conflict, or fences the
// other, whose instance the factory then hands out.
func TestBKConcurrentOpenOfOneName(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	f, _ := env.factoryOver(t, env.tr, func(s metadata.Store) metadata.Store { return slowStore{s, 5 * time.Millisecond} }, Config{})
	for round := range 5 {
		name := fmt.Sprintf("public/default/persistent/review-open-%d", round)
		if round%2 == 1 { // an existing one too
			ml, err := f.Open(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			addWait(t, ml, "before")
			if err := ml.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mls [2]ManagedLedger
		var errs [2]error
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mls[i], errs[i] = f.Open(ctx, name)
			}()
		}
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("round %d: concurrent open %d: %v", round, i, errs[i])
			}
			if r := await(t, addAsync(mls[i], "x"), "add"); r.err != nil {
				t.Fatalf("round %d: add through concurrent open %d: %v", round, i, r.err)
			}
		}
	}
}

// TestBKTerminateWithAddsInFlight: Terminate returns the last
// confirmed position while adds are in flight, and those adds then
// succeed after the terminated position.
func TestBKTerminateWithAddsInFlight(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	ml, err := f.Open(ctx, "public/default/persistent/review-terminate")
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "m0")
	ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: 50 * time.Millisecond})
	var pending []<-chan addResult
	for i := range 5 {
		pending = append(pending, addAsync(ml, fmt.Sprintf("m%d", i+1)))
	}
	last, err := ml.Terminate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range pending {
		r := await(t, ch, "in-flight add")
		if r.err == nil && r.p.Compare(last) > 0 {
			t.Errorf("add %d stored at %v, after the terminated position %v", i+1, r.p, last)
		}
	}
	if lc := ml.LastConfirmed(); lc != last {
		t.Errorf("last confirmed %v after terminating at %v", lc, last)
	}
	if r := await(t, addAsync(ml, "late"), "late add"); !errors.Is(r.err, ErrTerminated) {
		t.Errorf("add after terminate: %v", r.err)
	}
}

// TestBKCloseDuringRollover: a rollover running when the managed
// ledger closes creates the next ledger anyway and leaves its writer open
// (its goroutines and an OPEN ledger) after Close.
func TestBKCloseDuringRollover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, cl := env.factoryOver(t, ft, nil, Config{MaxEntriesPerLedger: 1, MinLedgerRolloverTime: time.Nanosecond})
	m, err := f.Open(ctx, "public/default/persistent/review-close-rollover")
	if err != nil {
		t.Fatal(err)
	}
	ml := m.(*bkLedger)
	ml.mu.Lock()
	first := ml.mu.writer.ID()
	ml.mu.Unlock()
	ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: 100 * time.Millisecond})
	r := addAsync(ml, "m0") // fills the ledger: a rollover starts, waiting for m0
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	await(t, r, "m0")
	deadline := time.Now().Add(10 * time.Second)
	for {
		ml.mu.Lock()
		rolling := ml.mu.rolling
		ml.mu.Unlock()
		if !rolling {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rollover never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ml.mu.Lock()
	w := ml.mu.writer
	ml.mu.Unlock()
	select {
	case <-w.Delivered():
	default:
		md, _ := cl.ReadMetadata(ctx, w.ID())
		t.Fatalf("after Close, the writer of ledger %d (the first was %d) is still open (state %s)", w.ID(), first, md.State)
	}
}

// TestBKOldOwnerCursorPersistAfterTakeover: after a takeover the old
// owner, not yet aware of it, persists a cursor: its cursor ledger was
// fenced by the new owner's recovery, so it starts another and points the
// cursor's node at it, at the version the new owner also read. The new
// owner's own persist then conflicts, and it fences itself.
func TestBKOldOwnerCursorPersistAfterTakeover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/review-zombie-cursor"
	old, err := env.factory(t, Config{MarkDeleteRate: 50}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := old.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var ps []Position
	for i := range 3 {
		ps = append(ps, addWait(t, old, fmt.Sprintf("m%d", i)))
	}
	waitPersisted(t, c.(*bkCursor)) // the cursor has a cursor ledger
	owner, err := env.factory(t, Config{MarkDeleteRate: 1}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MarkDelete(ctx, ps[0]); err != nil { // a consumer of the old owner acks
		t.Fatal(err)
	}
	waitPersistDone(t, c.(*bkCursor))             // the old owner wrote (or lost) its cursor
	waitPersistDone(t, cursorOf(t, owner, "sub")) // then the new owner wrote its recovered one
	if r := await(t, addAsync(owner, "m3"), "add to the new owner"); r.err != nil {
		t.Fatalf("the new owner after the old one persisted a cursor: %v", r.err)
	}
}

// TestBKReaderReadAcrossTrim: a read whose indices span ledgers
// re-maps each run under the lock; when the ledgers of a later run were
// trimmed meanwhile (a reader is not a durable cursor: trimming ignores
// it), the run is read from the first kept ledger at the trimmed
// position's entry id, and another entry comes back under a wrong
// position.
func TestBKReaderReadAcrossTrim(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond,
		CacheSize: 1}) // nothing cached: every read goes to the bookie
	_, sub, ps, reader := threeLedgersAndReader(t, f, "public/default/persistent/review-reader-trim")
	slowReads := ft.Inject(fault.Fault{Op: bkproto.OpRead, Match: plainRead, Action: fault.Delay, Delay: 500 * time.Millisecond})
	type readResult struct {
		es  []Entry
		err error
	}
	done := make(chan readResult, 1)
	go func() {
		es, err := reader.ReadEntries(ctx, 3, 1<<20) // e0 e1 (first ledger, slow), then e2
		done <- readResult{es, err}
	}()
	waitUntil(t, "the first run's read reached the bookie", func() bool { return ft.Hits(slowReads) > 0 })
	if err := sub.MarkDelete(ctx, ps[3]); err != nil {
		t.Fatal(err) // the first two ledgers are consumed: trimmed within a tick
	}
	var res readResult
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("read never returned")
	}
	ft.Remove(slowReads)
	all := res.es
	for _, s := range readAll(t, reader) {
		all = append(all, Entry{Data: []byte(s), Position: Position{-1, -1}})
	}
	// Whatever was trimmed may be skipped, but the reader must never get an
	// entry twice, out of order, or under another entry's position.
	seen := map[string]bool{}
	prev := -1
	for _, e := range all {
		k := -1
		fmt.Sscanf(string(e.Data), "e%d", &k)
		if seen[string(e.Data)] || k <= prev || (e.Position != Position{-1, -1} && e.Position != ps[k]) {
			t.Fatalf("reader got %q at %v after e%d (first read %v, err %v); stored at %v", e.Data, e.Position, prev, res.es, res.err, ps)
		}
		seen[string(e.Data)] = true
		prev = k
	}
	t.Logf("read %d entries, err %v", len(res.es), res.err)
}

// TestBKOpenWhileClosing: the factory forgets a managed ledger only
// when its Close ends, so an Open meanwhile (a client reconnecting after
// a topic unload) gets the closing instance, whose adds then fail.
func TestBKOpenWhileClosing(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	name := "public/default/persistent/review-open-closing"
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	p0 := addWait(t, ml, "m0")
	if err := c.MarkDelete(ctx, p0); err != nil {
		t.Fatal(err)
	}
	slowAdds := ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: 300 * time.Millisecond})
	pending := addAsync(ml, "m1") // Close waits for it
	closed := make(chan error, 1)
	go func() { closed <- ml.Close(ctx) }()
	for bl := ml.(*bkLedger); ; time.Sleep(time.Millisecond) { // the Close has begun
		bl.mu.Lock()
		closing := bl.mu.closed
		bl.mu.Unlock()
		if closing {
			break
		}
	}
	ft.Remove(slowAdds)
	again, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if r := await(t, addAsync(again, "m2"), "add after reopening"); r.err != nil {
		t.Fatalf("add through the managed ledger opened while the previous instance closed: %v", r.err)
	}
	if r := await(t, pending, "m1"); r.err != nil {
		t.Fatalf("m1: %v", r.err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	c2, err := again.OpenCursor(ctx, "sub", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if md := c2.MarkDeletePosition(); md != p0 {
		t.Fatalf("cursor mark-delete %v after reopening, want %v", md, p0)
	}
	if got := fmt.Sprint(readAll(t, c2)); got != "[m1 m2]" {
		t.Fatalf("after reopening: %v", got)
	}
}

// TestBKOldOwnerCloseAfterTakeover: an old owner that closes after
// a takeover (it noticed it lost the topic) flushes a cursor it never
// persisted: it points the cursor's node at a new cursor ledger, at the
// version the new owner read, and the new owner's first persist then
// conflicts and fences it.
func TestBKOldOwnerCloseAfterTakeover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/review-old-owner-close"
	old, err := env.factory(t, Config{MarkDeleteRate: 0.1}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest}); err != nil {
		t.Fatal(err)
	}
	addWait(t, old, "m0")
	owner, err := env.factory(t, Config{MarkDeleteRate: 1}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_ = old.Close(ctx)                            // flushes the cursor
	waitPersistDone(t, cursorOf(t, owner, "sub")) // the new owner's first persist of its recovered cursor
	if r := await(t, addAsync(owner, "m1"), "add to the new owner"); r.err != nil {
		t.Fatalf("the new owner after the old one closed: %v", r.err)
	}
}

// TestBKReaderBacklogAfterTrim: trimming moves a reader's
// mark-delete position past the first kept ledger's start but leaves its
// individually acknowledged ranges below it, which Backlog then counts
// negatively (both implementations share ackState).
func TestBKReaderBacklogAfterTrim(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, ml ManagedLedger, wait func(func() bool)) {
		sub, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
		var ps []Position
		for i := range 6 { // ledgers of two entries
			ps = append(ps, addWait(t, ml, fmt.Sprintf("e%d", i)))
		}
		reader, err := ml.NewNonDurableCursor(Position{LedgerID: -1, EntryID: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := reader.Delete(ctx, ps[1]); err != nil {
			t.Fatal(err)
		}
		if err := sub.MarkDelete(ctx, ps[3]); err != nil { // the first two ledgers go
			t.Fatal(err)
		}
		wait(func() bool { return ml.Entries() == 2 })
		if b := reader.Backlog(); b != 2 {
			t.Fatalf("reader backlog %d with 2 entries stored, none acknowledged", b)
		}
	}
	t.Run("memory", func(t *testing.T) {
		ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 2}).Open(ctx, "t")
		check(t, ml, func(f func() bool) {
			if !f() {
				t.Fatalf("not trimmed: %d entries", ml.Entries())
			}
		})
	})
	t.Run("bookie", func(t *testing.T) {
		env := newBKEnv(t)
		ml, err := env.factory(t, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond}).Open(ctx, "public/default/persistent/review-reader-backlog")
		if err != nil {
			t.Fatal(err)
		}
		check(t, ml, func(f func() bool) {
			deadline := time.Now().Add(10 * time.Second)
			for !f() {
				if time.Now().After(deadline) {
					t.Fatalf("not trimmed: %d entries", ml.Entries())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	})
}

// TestBKCloseTimeoutCallsAddsBack: Close(ctx) with a deadline
// that passes while an add is in flight never calls that add back:
// ledger.WriteHandle.Close used to end the handle's delivery goroutine
// when its wait for pending adds timed out, and the add's completion was
// then never delivered; now the pending adds fail first.
func TestBKCloseTimeoutCallsAddsBack(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	ml, err := f.Open(ctx, "public/default/persistent/review-close-timeout")
	if err != nil {
		t.Fatal(err)
	}
	ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: 500 * time.Millisecond})
	r := addAsync(ml, "m0")
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	t.Logf("close: %v", ml.Close(cctx))
	select {
	case res := <-r:
		t.Logf("add called back: %v %v", res.p, res.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the add in flight when Close timed out was never called back")
	}
}

// TestBKFencedAddsCallBackInOrder: when another owner fences the
// ledger, the adds in flight fail, each callback on a goroutine of its
// own: out of append order, which the contract promises.
func TestBKFencedAddsCallBackInOrder(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	name := "public/default/persistent/review-fenced-order"
	old, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, old, "m0")
	ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: 200 * time.Millisecond})
	const n = 50
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		old.AddEntry([]byte(fmt.Sprint(i)), func(_ Position, err error) {
			defer wg.Done()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	if _, err := env.factory(t, Config{}).Open(ctx, name); err != nil { // fences the old owner's ledger
		t.Fatal(err)
	}
	wg.Wait()
	for k := 1; k < len(order); k++ {
		if order[k] < order[k-1] {
			t.Fatalf("add callbacks out of order: %v", order)
		}
	}
}

// TestBKReaderPlannedBeforeTrim: a reader plans its read (the indices from
// its position) and a trim removes all of them before it fetches. The
// read must skip what was trimmed, as a reader does not hold ledgers, not
// fail: the managed-ledger model once saw "entry 0 was trimmed: invalid
// position" from a reader racing a trim.
func TestBKReaderPlannedBeforeTrim(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	f, _ := env.factoryOver(t, env.tr, nil, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond})
	ml, sub, ps, reader := threeLedgersAndReader(t, f, "public/default/persistent/review-reader-planned-trim")
	bl := ml.(*bkLedger)
	var once sync.Once
	bl.testHookBeforeFetch = func() {
		once.Do(func() { // planned e0 e1; now the first two ledgers go
			if err := sub.MarkDelete(ctx, ps[3]); err != nil {
				t.Error(err)
			}
			waitUntil(t, "the first two ledgers trimmed", func() bool {
				bl.mu.Lock()
				defer bl.mu.Unlock()
				return bl.baseLocked() >= 4
			})
		})
	}
	es, err := reader.ReadEntries(ctx, 2, 1<<20)
	if err != nil {
		t.Fatalf("a reader whose planned entries were trimmed: %v", err)
	}
	var got []string
	for _, e := range es {
		got = append(got, string(e.Data))
	}
	got = append(got, readAll(t, reader)...)
	if fmt.Sprint(got) != "[e4 e5]" {
		t.Fatalf("the reader got %v after the trim, want [e4 e5]", got)
	}
}
