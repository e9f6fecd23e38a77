package managedledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

func quiet() *slog.Logger { return ledgertest.Quiet() }

// bkEnv is one in-process bookie (ledgertest), in-memory metadata and
// ledger clients over a LocalTransport; a stop is a crash (only synced
// data survives).
type bkEnv struct {
	t    *testing.T
	real bool // entry-log storage; otherwise Memory, replayed from the journal after a crash
	fs   *engine.MemFS
	meta *metadata.MemoryServer
	tr   *ledger.LocalTransport
	bk   *ledgertest.Bookie
}

func newBKEnv(t *testing.T) *bkEnv { return newBKEnvWith(t, false) }

func newBKEnvWith(t *testing.T, real bool) *bkEnv {
	e := &bkEnv{t: t, real: real, fs: engine.NewMem(), meta: metadata.NewMemoryServer(), tr: ledger.NewLocalTransport()}
	e.startBookie()
	t.Cleanup(e.stopBookie)
	return e
}

func (e *bkEnv) startBookie() {
	st := ledgertest.MemoryStorage
	if e.real {
		st = ledgertest.EntryLogStorage
	}
	e.bk = ledgertest.StartBookie(e.t, e.fs, e.meta, e.tr, "local", st)
}

// stopBookie crashes the bookie: only what was synced survives. It leaves
// the transport first, so it answers nothing after the image is taken (an
// add it made durable later, acknowledged, would be missing from it).
func (e *bkEnv) stopBookie() {
	if e.bk == nil {
		return
	}
	e.tr.Add(e.bk.ID, nil)
	image := e.fs.CrashClone(engine.CrashOptions{})
	e.bk.Stop(e.tr)
	e.fs, e.bk = image, nil
}

func (e *bkEnv) factory(t *testing.T, cfg Config) *BKFactory {
	t.Helper()
	cl, store := ledgertest.Client(t, e.meta, e.tr)
	cfg.Store, cfg.Ledgers, cfg.Logger = store, cl, ledgertest.Quiet()
	if cfg.MarkDeleteRate == 0 {
		cfg.MarkDeleteRate = 50
	}
	f, err := NewBKFactory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fataler is what addWait needs from testing.TB and rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func addWait(t fataler, ml ManagedLedger, data string) Position {
	t.Helper()
	type res struct {
		p   Position
		err error
	}
	ch := make(chan res, 1)
	ml.AddEntry([]byte(data), func(p Position, err error) { ch <- res{p, err} })
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("add %q: %v", data, r.err)
		}
		return r.p
	case <-time.After(20 * time.Second):
		t.Fatalf("add %q never completed", data)
	}
	return Position{}
}

func readAll(t testing.TB, c Cursor) []string {
	t.Helper()
	var out []string
	for {
		es, err := c.ReadEntries(context.Background(), 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		for _, e := range es {
			out = append(out, string(e.Data))
		}
	}
}

func TestBKAppendReadRollover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ml, err := env.factory(t, Config{MaxEntriesPerLedger: 3, MinLedgerRolloverTime: time.Nanosecond}).Open(ctx, "public/default/persistent/t1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var ledgers = map[int64]bool{}
	for i := range 10 {
		p := addWait(t, ml, fmt.Sprintf("m%d", i))
		ledgers[p.LedgerID] = true
	}
	if len(ledgers) < 3 {
		t.Fatalf("10 entries with 3 per ledger went to %d ledgers", len(ledgers))
	}
	got := readAll(t, c)
	if fmt.Sprint(got) != "[m0 m1 m2 m3 m4 m5 m6 m7 m8 m9]" {
		t.Fatalf("read %v", got)
	}
	if ml.Entries() != 10 || c.Backlog() != 10 {
		t.Fatalf("entries %d backlog %d", ml.Entries(), c.Backlog())
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBKRestartKeepsEntriesAndCursors: acknowledged entries and persisted
// cursor positions survive a crash of the bookie and a reopen.
func TestBKRestartKeepsEntriesAndCursors(t *testing.T) {
	env := newBKEnvWith(t, true)
	ctx := context.Background()
	name := "public/default/persistent/t2"
	ml, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var pos []Position
	for i := range 20 {
		pos = append(pos, addWait(t, ml, fmt.Sprintf("m%d", i)))
	}
	if err := c.MarkDelete(ctx, pos[9]); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, pos[12], pos[13]); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	env.stopBookie()
	env.startBookie()
	ml2, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ml2.OpenCursor(ctx, "sub", CursorOptions{Initial: Latest})
	if err != nil {
		t.Fatal(err)
	}
	if md := c2.MarkDeletePosition(); md != pos[9] {
		t.Fatalf("mark-delete after restart %v, want %v", md, pos[9])
	}
	got := readAll(t, c2)
	if fmt.Sprint(got) != "[m10 m11 m14 m15 m16 m17 m18 m19]" {
		t.Fatalf("after restart read %v", got)
	}
	if p := addWait(t, ml2, "after"); p.LedgerID == pos[0].LedgerID {
		t.Fatalf("the reopened ledger writes to the old ledger %d", p.LedgerID)
	}
}

// TestBKTakeoverFencesOldOwner: a second owner opening the managed ledger
// fences the first, whose adds then fail; nothing acknowledged is lost.
func TestBKTakeoverFencesOldOwner(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/t3"
	old, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// A subscription from the start keeps the ledgers: without one, the
	// new owner's trim may drop the old owner's ledger (a topic without
	// subscriptions keeps only its current ledger) before the test's
	// cursor opens, as one loaded run showed ([m5]).
	if _, err := old.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		addWait(t, old, fmt.Sprintf("m%d", i))
	}
	owner, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	old.AddEntry([]byte("zombie"), func(_ Position, err error) { ch <- err })
	if err := <-ch; err == nil {
		t.Fatal("the old owner's add succeeded after a takeover")
	}
	addWait(t, owner, "m5")
	c, _ := owner.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if got := fmt.Sprint(readAll(t, c)); got != "[m0 m1 m2 m3 m4 m5]" {
		t.Fatalf("after takeover: %v", got)
	}
}

// TestBKResetPersistsMarkDelete is Pulsar #18236: after a reset and a
// restart the cursor starts at the reset position.
func TestBKResetPersistsMarkDelete(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	name := "public/default/persistent/t4"
	ml, _ := env.factory(t, Config{}).Open(ctx, name)
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var pos []Position
	for i := range 10 {
		pos = append(pos, addWait(t, ml, fmt.Sprintf("m%d", i)))
	}
	readAll(t, c)
	if err := c.MarkDelete(ctx, pos[8]); err != nil {
		t.Fatal(err)
	}
	if err := c.Reset(ctx, pos[3]); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ml2, _ := env.factory(t, Config{}).Open(ctx, name)
	c2, _ := ml2.OpenCursor(ctx, "sub", CursorOptions{})
	if got := fmt.Sprint(readAll(t, c2)); got != "[m3 m4 m5 m6 m7 m8 m9]" {
		t.Fatalf("after reset and restart: %v", got)
	}
}

// TestBKTrimAndTailing: consumed ledgers are deleted; a tailing read
// wakes on the next add.
func TestBKTrimAndTailing(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	f := env.factory(t, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond})
	ml, _ := f.Open(ctx, "public/default/persistent/t5")
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	var last Position
	for i := range 9 {
		last = addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	readAll(t, c)
	if err := c.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ml.Entries() > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("consumed ledgers not trimmed: %d entries stored", ml.Entries())
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := make(chan []Entry, 1)
	c.ReadEntriesOrWait(10, 1<<20, func(es []Entry, err error) { got <- es })
	addWait(t, ml, "tail")
	select {
	case es := <-got:
		if len(es) != 1 || string(es[0].Data) != "tail" {
			t.Fatalf("tailing read got %v", es)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tailing read not woken")
	}
}

// TestBKCursorModel runs the cursor model over the ledger-backed
// implementation (rollovers every 1 to 5 entries), with reopens through a
// new factory (empty cache, state from the cursor ledger). Trimming is
// held off by retention: it runs in the background here, and
// TestBKTrimAndTailing covers it.
func TestBKCursorModel(t *testing.T) {
	env := newBKEnv(t)
	n := 0
	per := int64(0)
	cfg := func() Config {
		return Config{MaxEntriesPerLedger: per, MinLedgerRolloverTime: time.Nanosecond, Retention: Retention{Time: time.Hour, Size: -1}}
	}
	runCursorModel(t, func(rt *rapid.T) ManagedLedger {
		per = int64(rapid.IntRange(1, 5).Draw(rt, "perLedger"))
		n++
		ml, err := env.factory(t, cfg()).Open(context.Background(), fmt.Sprintf("public/default/persistent/model-%d", n))
		if err != nil {
			rt.Fatal(err)
		}
		return ml
	}, func(rt *rapid.T, closed ManagedLedger) ManagedLedger {
		ml, err := env.factory(t, cfg()).Open(context.Background(), closed.Name())
		if err != nil {
			rt.Fatal(err)
		}
		return ml
	})
}

func TestBKDeleteCursorEndsWaitingRead(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ml, _ := env.factory(t, Config{}).Open(ctx, "public/default/persistent/del")
	c, _ := ml.OpenCursor(ctx, "sub", CursorOptions{})
	got := make(chan error, 1)
	c.ReadEntriesOrWait(10, 1<<20, func(_ []Entry, err error) { got <- err })
	if err := ml.DeleteCursor(ctx, "sub"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, ErrCursorNotFound) {
			t.Fatalf("waiting read ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting read never ended after DeleteCursor")
	}
}

// TestAckStateSkip: skip acknowledges exactly the next n unacknowledged
// indices, as a naive loop would.
func TestAckStateSkip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		end := int64(rapid.IntRange(1, 60).Draw(rt, "end"))
		var fast, naive ackState
		fast.markDelete = int64(rapid.IntRange(-1, int(end)-1).Draw(rt, "md"))
		naive.markDelete = fast.markDelete
		for _, i := range rapid.SliceOfN(rapid.Int64Range(0, end-1), 0, 20).Draw(rt, "acks") {
			if i > fast.markDelete {
				fast.addAcked(i)
				naive.addAcked(i)
			}
		}
		fast.normalise()
		naive.normalise()
		n := int64(rapid.IntRange(0, 70).Draw(rt, "n"))
		fast.skip(n, 0, end)
		for i, left := naive.markDelete+1, n; i < end && left > 0; i++ {
			if !naive.isAcked(i) {
				naive.addAcked(i)
				left--
			}
		}
		naive.normalise()
		for i := int64(0); i < end; i++ {
			if fast.isAcked(i) != naive.isAcked(i) {
				rt.Fatalf("index %d: skip says %v, naive %v (n=%d)", i, fast.isAcked(i), naive.isAcked(i), n)
			}
		}
	})
}

// TestSkipAndClearBacklog on both implementations.
func TestSkipAndClearBacklog(t *testing.T) {
	env := newBKEnv(t)
	for name, f := range map[string]Factory{"memory": NewMemoryFactory(MemoryOptions{}), "bookie": env.factory(t, Config{})} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ml, _ := f.Open(ctx, "public/default/persistent/skip")
			c, _ := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
			var pos []Position
			for i := range 10 {
				pos = append(pos, addWait(t, ml, fmt.Sprintf("m%d", i)))
			}
			if err := c.Delete(ctx, pos[1], pos[3]); err != nil {
				t.Fatal(err)
			}
			if err := c.SkipEntries(ctx, 3); err != nil { // m0, m2, m4
				t.Fatal(err)
			}
			if got := fmt.Sprint(readAll(t, c)); got != "[m5 m6 m7 m8 m9]" {
				t.Fatalf("after skip: %v", got)
			}
			if c.Backlog() != 5 || c.BacklogSize() != 10 {
				t.Fatalf("backlog %d entries %d bytes, want 5 and 10", c.Backlog(), c.BacklogSize())
			}
			if err := c.ClearBacklog(ctx); err != nil {
				t.Fatal(err)
			}
			if c.Backlog() != 0 || c.MarkDeletePosition() != pos[9] {
				t.Fatalf("after clear: backlog %d mark-delete %v", c.Backlog(), c.MarkDeletePosition())
			}
		})
	}
}

// unreachable, injected into a fault.Transport, makes every bookie behind
// it unreachable (requests fail as over a broken connection).
var unreachable = fault.Fault{Action: fault.Fail}

// plainRead selects plain entry reads: not fencing, long-poll or LAC reads.
func plainRead(_ string, req *bkproto.Request) bool { return req.Flags == 0 && req.EntryID >= 0 }

// slowFaults delays adds by add and plain entry reads by read (not at all
// when 0) and returns the faults injected.
func slowFaults(ft *fault.Transport, add, read time.Duration) []int {
	var ids []int
	if add > 0 {
		ids = append(ids, ft.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Delay, Delay: add}))
	}
	if read > 0 {
		ids = append(ids, ft.Inject(fault.Fault{Op: bkproto.OpRead, Match: plainRead, Action: fault.Delay, Delay: read}))
	}
	return ids
}

// TestBKFullAfterQueuedAddsRollsOver: adds made while a rollover runs go
// to the next ledger together; when they fill it, the ledger rolls over
// at once, so the add after them does not land in a ledger already over
// MaxEntriesPerLedger (a ledger consumed up to its last queued entry is
// then trimmable without waiting for one more).
func TestBKFullAfterQueuedAddsRollsOver(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	const per = 3
	ml, err := env.factory(t, Config{MaxEntriesPerLedger: per, MinLedgerRolloverTime: time.Nanosecond}).Open(ctx, "public/default/persistent/queued")
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close(ctx)
	var wg sync.WaitGroup
	pos := make([]Position, 40)
	for i := range pos {
		wg.Add(1)
		ml.AddEntry([]byte(fmt.Sprintf("m%d", i)), func(p Position, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
			pos[i] = p
		})
	}
	wg.Wait()
	perLedger := map[int64]int{}
	for _, p := range pos {
		perLedger[p.LedgerID]++
	}
	last := pos[len(pos)-1].LedgerID
	if perLedger[last] < per {
		t.Skipf("the adds did not queue behind a rollover (ledgers %v)", perLedger)
	}
	next := addWait(t, ml, "after")
	if next.LedgerID == last {
		t.Fatalf("add after a ledger filled by queued adds (%d entries, max %d) went to it too: %v", perLedger[last], per, next)
	}
}
