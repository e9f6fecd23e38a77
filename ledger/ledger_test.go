package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/failover"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

var password = []byte("secret")

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func payload(ledger, entry int64) []byte {
	return []byte(fmt.Sprintf("ledger %d entry %d %s", ledger, entry, bytes.Repeat([]byte{byte(entry)}, int(entry%50))))
}

// acks records the entries acknowledged to a writer.
type acks struct {
	mu  sync.Mutex
	ids map[int64]bool
	max int64
}

func newAcks() *acks { return &acks{ids: map[int64]bool{}, max: -1} }

func (a *acks) cb(wg *sync.WaitGroup) AddCallback {
	return func(id int64, err error) {
		if err == nil {
			a.mu.Lock()
			a.ids[id] = true
			a.max = max(a.max, id)
			a.mu.Unlock()
		}
		wg.Done()
	}
}

// checkPersistence is the property every scenario ends with: every
// acknowledged entry is at or below the last entry after close, and two
// independent readers see identical, correct bytes for every entry.
func checkPersistence(t *testing.T, c *cluster, id int64, a *acks) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	r1, err := c.client(t, Config{}).OpenRecover(ctx, id, password)
	if err != nil {
		t.Fatalf("recover ledger %d: %v", id, err)
	}
	md := r1.Metadata()
	if md.State != StateClosed {
		t.Fatalf("ledger %d not closed after recovery: %s", id, md.State)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.max > md.LastEntryID {
		t.Fatalf("ledger %d: entry %d was acknowledged but the ledger was closed at %d\nensembles %+v\n%s", id, a.max, md.LastEntryID, md.Ensembles, c.dump(id))
	}
	r2, err := c.client(t, Config{}).OpenNoRecovery(ctx, id, password)
	if err != nil {
		t.Fatal(err)
	}
	if md.LastEntryID < 0 {
		return
	}
	e1, err := r1.Read(ctx, 0, md.LastEntryID)
	if err != nil {
		t.Fatalf("reader 1: %v", err)
	}
	e2, err := r2.Read(ctx, 0, md.LastEntryID)
	if err != nil {
		t.Fatalf("reader 2: %v", err)
	}
	for i := range e1 {
		if !bytes.Equal(e1[i].Payload, e2[i].Payload) {
			t.Fatalf("ledger %d entry %d: readers disagree", id, i)
		}
		if !bytes.Equal(e1[i].Payload, payload(id, int64(i))) {
			t.Fatalf("ledger %d entry %d: wrong bytes %q", id, i, e1[i].Payload)
		}
	}
}

func appendN(t *testing.T, w *WriteHandle, n int, a *acks) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		w.AppendAsync(payload(w.ID(), w.peekNext()), a.cb(&wg))
	}
	wg.Wait()
}

// peekNext is the id the next append gets (tests have one appender).
func (h *WriteHandle) peekNext() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.nextEntry
}

func TestAppendReadClose(t *testing.T) {
	c := newCluster(t, 3, 1)
	cl := c.client(t, Config{})
	ctx := ctxFor(t, 30*time.Second)
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 199, a)
	appendN(t, w, 1, a) // sent once the 199 completed: it carries LAC 198
	if len(a.ids) != 200 || w.LastAddConfirmed() != 199 {
		t.Fatalf("acked %d, LAC %d", len(a.ids), w.LastAddConfirmed())
	}
	// A tailing reader sees the LAC without recovery and never reads past it.
	r, err := c.client(t, Config{}).OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	// Pipelined entries carry the LAC of when they were sent, so a reader
	// may lag; it never sees more than the writer confirmed.
	if lac := r.LastAddConfirmed(); lac < 198 || lac > 199 {
		t.Fatalf("tailing reader LAC %d", lac)
	}
	if _, err := r.Read(ctx, 0, r.LastAddConfirmed()); err != nil {
		t.Fatalf("tailing read: %v", err)
	}
	if _, err := r.Read(ctx, 0, 200); !errors.Is(err, ErrReadBeyondLAC) {
		t.Fatalf("read past LAC: %v", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md, _ := cl.ReadMetadata(ctx, w.ID())
	if md.State != StateClosed || md.LastEntryID != 199 {
		t.Fatalf("after close: %s last %d", md.State, md.LastEntryID)
	}
	checkPersistence(t, c, w.ID(), a)
	if _, err := c.client(t, Config{}).OpenNoRecovery(ctx, w.ID(), []byte("wrong")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("open with a wrong password: %v", err)
	}
}

// TestExplicitLAC: an idle writer tells bookies its LAC, so a tailing
// reader sees every acknowledged entry without another add.
func TestExplicitLAC(t *testing.T) {
	c := newCluster(t, 3, 8)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.client(t, Config{ExplicitLACInterval: 20 * time.Millisecond}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 50, newAcks()) // pipelined: the entries themselves carry stale LACs
	r, err := c.client(t, Config{}).OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		lac, err := r.ReadLAC(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lac == 49 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tailing reader LAC %d, want 49 from the explicit LAC", lac)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := r.Read(ctx, 0, 49); err != nil {
		t.Fatal(err)
	}
}

func TestTailingReaderWaitsForLAC(t *testing.T) {
	c := newCluster(t, 3, 2)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.client(t, Config{}).OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	polling := make(chan struct{})
	var once sync.Once
	c.faults.addRule(func(_ string, req *bkproto.Request) fate {
		if req.Op == bkproto.OpRead && req.Flags&bkproto.FlagLongPoll != 0 {
			once.Do(func() { close(polling) })
		}
		return deliver
	})
	got := make(chan int64, 1)
	go func() {
		lac, err := r.WaitLAC(ctx, -1, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- lac
	}()
	<-polling // the reader's long poll is on its way: the appends come after it
	for i := range 3 {
		if _, err := w.Append(ctx, payload(w.ID(), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case lac := <-got:
		if lac < 0 {
			t.Fatalf("long poll returned LAC %d", lac)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not return after appends")
	}
}

func TestEnsembleChangeOnBookieFailure(t *testing.T) {
	c := newCluster(t, 4, 3)
	fo := failover.NewRecorder()
	cl := c.client(t, Config{AddTimeout: 500 * time.Millisecond, Failover: fo})
	ctx := ctxFor(t, 30*time.Second)
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 50, a)
	victim := w.Metadata().Ensembles[0].Bookies[1]
	c.stopBookie(victim) // crashes: its adds fail, the writer replaces it
	appendN(t, w, 50, a)
	if len(a.ids) != 100 {
		t.Fatalf("%d of 100 appends acknowledged across a bookie failure", len(a.ids))
	}
	md := w.Metadata()
	if len(md.Ensembles) < 2 {
		t.Fatalf("no ensemble change after %s failed: %+v", victim, md.Ensembles)
	}
	for _, b := range md.last().Bookies {
		if b == victim {
			t.Fatalf("failed bookie %s still in the last ensemble %v", victim, md.last().Bookies)
		}
	}
	// The failover metrics saw the failure and the replacement once each.
	for _, step := range []failover.Step{failover.BookieFailureDetect, failover.EnsembleChange} {
		if n := fo.Count(step); n != 1 {
			t.Errorf("magnetar_failover_seconds{step=%q} count %d, want 1", step, n)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkPersistence(t, c, w.ID(), a)
}

func TestRecoveryFencesOldWriter(t *testing.T) {
	c := newCluster(t, 3, 4)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 30, a)
	r, err := c.client(t, Config{}).OpenRecover(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	if last := r.Metadata().LastEntryID; last != 29 {
		t.Fatalf("recovered last entry %d, want 29", last)
	}
	if _, err := w.Append(ctx, []byte("late")); !errors.Is(err, ErrFenced) {
		t.Fatalf("append after recovery: %v, want ErrFenced", err)
	}
	if err := w.Close(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("close after recovery: %v, want ErrFenced", err)
	}
	checkPersistence(t, c, w.ID(), a)
}

// TestLostFenceRequest is BookKeeper #2614: the fence request to one
// bookie is lost; recovery reads must fence it, so the old writer never
// reaches Qa after the ledger is closed.
func TestLostFenceRequest(t *testing.T) {
	c := newCluster(t, 3, 5)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 20, a)
	lost := w.Metadata().Ensembles[0].Bookies[0]
	c.faults.addRule(func(id string, req *bkproto.Request) fate {
		if id == lost && req.Op == bkproto.OpRead && req.Flags&bkproto.FlagFence != 0 && req.EntryID == bkproto.EntryLAC {
			return dropRequest
		}
		return deliver
	})
	// The old writer keeps writing while the recovery runs.
	stop, stopped := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			wg.Add(1)
			w.AppendAsync(payload(w.ID(), w.peekNext()), a.cb(&wg))
			time.Sleep(200 * time.Microsecond)
		}
	}()
	time.Sleep(5 * time.Millisecond)
	if _, err := c.client(t, Config{}).OpenRecover(ctx, w.ID(), password); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	<-stopped
	wg.Wait()
	checkPersistence(t, c, w.ID(), a)
}

// TestWipedBookieCannotTruncate is BookKeeper #2612: a bookie that lost its
// data must not come back under its identity and answer "no such entry"
// (with Qw=2, Qa=2, one such answer would end the ledger early). Its cookie
// check refuses the restart, so recovery waits instead of truncating.
func TestWipedBookieCannotTruncate(t *testing.T) {
	c := newCluster(t, 0, 6)
	ctx := ctxFor(t, 30*time.Second)
	for i := range 3 {
		id, fs := fmt.Sprintf("bookie-%d", i), engine.NewMem()
		ck := bookie.Cookie{BookieID: id, JournalDirs: []string{"/journal"}, LedgerDirs: []string{"/ledgers"}}
		if err := bookie.CheckCookies(ctx, fs, c.meta.NewSession(), ck); err != nil {
			t.Fatal(err)
		}
		c.addBookie(id, fs)
	}
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 10, a)
	ens := w.Metadata().Ensembles[0].Bookies
	wiped, other := c.nodes[ens[0]], c.nodes[ens[1]]
	c.stopBookie(wiped.id)
	c.stopBookie(other.id)
	wiped.fs = engine.NewMem() // the disk was replaced
	ck := bookie.Cookie{BookieID: wiped.id, JournalDirs: []string{"/journal"}, LedgerDirs: []string{"/ledgers"}}
	if err := bookie.CheckCookies(ctx, wiped.fs, c.meta.NewSession(), ck); !errors.Is(err, bookie.ErrCookie) {
		t.Fatalf("wiped bookie passed its cookie check: %v", err)
	}
	// So it stays down; with its peer down too, recovery cannot even fence.
	short := ctxFor(t, 5*time.Second)
	if _, err := c.client(t, Config{ReadTimeout: 200 * time.Millisecond}).OpenRecover(short, w.ID(), password); !errors.Is(err, ErrRecoveryIncomplete) {
		t.Fatalf("recovery with no bookie up: %v, want ErrRecoveryIncomplete", err)
	}
	c.startBookie(other.id)
	// With the peer back, recovery finds every entry there and writes them
	// back to the peer and the third bookie, which replaces the wiped one.
	// (Had the wiped bookie come back empty, its single "no such entry"
	// would have been enough, with Qw-Qa+1 = 1, to end the ledger early:
	// that is what the cookie prevents.)
	r, err := c.client(t, Config{ReadTimeout: 200 * time.Millisecond}).OpenRecover(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	if last := r.Metadata().LastEntryID; last != 9 {
		t.Fatalf("recovered last entry %d, want 9", last)
	}
}

// corruptingStorage reports corruption for chosen entries.
type corruptingStorage struct {
	entrylog.Storage
	bad func(ledgerID, entryID int64) bool
}

func (s *corruptingStorage) ReadEntry(l, e int64) ([]byte, error) {
	b, err := s.Storage.ReadEntry(l, e)
	if err == nil && s.bad(l, e) {
		return nil, fmt.Errorf("entry log 1 offset 4096: %w", engine.ErrCorruption)
	}
	return b, err
}

// TestCorruptReplica is BookKeeper #2908: a corrupt replica is an error,
// never a missing entry. Reads go to the other replica; recovery does not
// end the ledger at the corrupt entry.
func TestCorruptReplica(t *testing.T) {
	c := newCluster(t, 2, 7)
	ctx := ctxFor(t, 30*time.Second)
	// Ack quorum 2: every entry is on both replicas before the test stops
	// one. With 1, the last add could still be on its way to the good
	// replica when that is stopped, leaving the entry only on the replica
	// this test corrupts, and the final recovery rightly refuses to end
	// the ledger (a flake under CI load).
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 10, a)
	appendN(t, w, 1, a) // its LAC covers the ten before it, so readers see them
	ens := w.Metadata().Ensembles[0].Bookies
	bad := c.nodes[ens[0]]
	c.stopBookie(bad.id)
	bad.wrap = func(s entrylog.Storage) entrylog.Storage {
		return &corruptingStorage{Storage: s, bad: func(_, e int64) bool { return e >= 5 }}
	}
	c.startBookie(bad.id)
	// Reads fall back to the good replica.
	r, err := c.client(t, Config{}).OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, 0, r.LastAddConfirmed()); err != nil {
		t.Fatalf("read with one corrupt replica: %v", err)
	}
	// With the good replica down, recovery must not end the ledger at 5.
	c.stopBookie(ens[1])
	short := ctxFor(t, 5*time.Second)
	_, err = c.client(t, Config{ReadTimeout: 200 * time.Millisecond}).OpenRecover(short, w.ID(), password)
	if !errors.Is(err, ErrRecoveryIncomplete) {
		t.Fatalf("recovery over a corrupt replica: %v, want ErrRecoveryIncomplete", err)
	}
	c.startBookie(ens[1])
	checkPersistence(t, c, w.ID(), a)
}

// TestAddRacingRecovery is BookKeeper #4701 seen from the client: appends
// racing a recovery never leave an acknowledged entry beyond the end.
func TestAddRacingRecovery(t *testing.T) {
	for seed := uint64(0); seed < 10; seed++ {
		c := newCluster(t, 3, 100+seed)
		c.faults.maxDelay = 300 * time.Microsecond
		ctx := ctxFor(t, 30*time.Second)
		w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
		if err != nil {
			t.Fatal(err)
		}
		a := newAcks()
		var wg sync.WaitGroup
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 300; i++ {
				wg.Add(1)
				w.AppendAsync(payload(w.ID(), int64(i)), a.cb(&wg))
				if i == 150 {
					go c.client(t, Config{}).OpenRecover(ctx, w.ID(), password)
				}
			}
		}()
		<-done
		wg.Wait()
		checkPersistence(t, c, w.ID(), a)
	}
}

// TestDeleteAndGarbageCollect: deleting a ledger removes its metadata, and
// each bookie's garbage collection then drops its entries.
func TestDeleteAndGarbageCollect(t *testing.T) {
	c := newCluster(t, 3, 9)
	ctx := ctxFor(t, 30*time.Second)
	cl := c.client(t, Config{})
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 10, newAcks())
	appendN(t, keep, 10, newAcks())
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.OpenNoRecovery(ctx, w.ID(), password); !errors.Is(err, ErrNoSuchLedger) {
		t.Fatalf("open a deleted ledger: %v", err)
	}
	for _, id := range sortedIDs(c) {
		core := c.nodes[id].core
		if _, err := core.CollectGarbage(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if ok, _ := core.Storage().LedgerExists(w.ID()); ok {
			t.Fatalf("%s still holds deleted ledger %d after GC", id, w.ID())
		}
	}
	if err := keep.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := cl.OpenNoRecovery(ctx, keep.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, 0, 9); err != nil {
		t.Fatalf("a live ledger after GC: %v", err)
	}
}

// Recovery with one bookie of the ensemble stopped (no answer, no broken
// connection) decides as soon as the others suffice, as BookKeeper's:
// fencing once every write set has Qw-Qa+1 fenced bookies, each entry as
// soon as it is found or Qw-Qa+1 replicas lack it. It used to wait for
// the stopped bookie's read timeout, on every fence and every entry past
// the end: a topic moving to another broker while a bookie was stopped
// waited with it (the fault suite's pause-bookie, 2-6 s).
func TestRecoveryDoesNotWaitForAStoppedBookie(t *testing.T) {
	c := newCluster(t, 3, 6)
	ctx := ctxFor(t, 20*time.Second)
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 30, a)
	stopped := w.Metadata().Ensembles[0].Bookies[1]
	c.faults.addRule(func(id string, _ *bkproto.Request) fate {
		if id == stopped {
			return hang
		}
		return deliver
	})
	r, err := c.client(t, Config{ReadTimeout: time.Minute}).OpenRecover(ctx, w.ID(), password)
	if err != nil {
		t.Fatalf("recovery with %s stopped (read timeout 1 min, deadline 20 s): %v", stopped, err)
	}
	if last := r.Metadata().LastEntryID; last != 29 {
		t.Fatalf("recovered last entry %d, want 29", last)
	}
}

// A read asks a stalled bookie (requests outstanding, no answer for
// slowAfter) last instead of first: it used to wait the speculative read
// timeout on it (2 s by default) for every entry whose write set it
// leads, as a topic's load did while a bookie was stopped.
func TestReadsAskAStalledBookieLast(t *testing.T) {
	c := newCluster(t, 3, 7)
	ctx := ctxFor(t, 20*time.Second)
	cl := c.client(t, Config{SpeculativeReadTimeout: time.Minute, ReadTimeout: time.Minute})
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 10, a)
	stopped := w.Metadata().Ensembles[0].Bookies[0] // first in the write set of entries 0, 3, 6, ...
	c.faults.addRule(func(id string, _ *bkproto.Request) fate {
		if id == stopped {
			return hang
		}
		return deliver
	})
	appendN(t, w, 3, a) // acknowledged by the other two; the stopped bookie's requests stay outstanding
	time.Sleep(slowAfter + 100*time.Millisecond)
	r, err := cl.OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	for e := int64(0); e < 9; e += 3 {
		if _, err := r.Read(ctx, e, e); err != nil {
			t.Fatalf("read entry %d led by the stopped bookie %s (speculative timeout 1 min, deadline 20 s): %v", e, stopped, err)
		}
	}
}

// A client that knows nothing yet of a stopped bookie (a broker taking a
// topic over reads its cursors first) waits the default speculative read
// timeout on it once: well under issue 40's one-second bound for topics
// with a bookie to spare. It waited BookKeeper's 2 s (the fault suite's
// pause-bookie seed 3 of 5 Dec: 2.1 s).
func TestDefaultSpeculativeReadKeepsTheStallBound(t *testing.T) {
	c := newCluster(t, 3, 8)
	ctx := ctxFor(t, 20*time.Second)
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 6, newAcks())
	if _, err := w.Append(ctx, []byte("carries the LAC")); err != nil {
		t.Fatal(err)
	}
	stopped := w.Metadata().Ensembles[0].Bookies[0] // leads entry 3's write set
	c.faults.addRule(func(id string, _ *bkproto.Request) fate {
		if id == stopped {
			return hang
		}
		return deliver
	})
	fresh := c.client(t, Config{SpeculativeReadTimeout: -1, ReadTimeout: time.Minute}) // -1: the client's default
	r, err := fresh.OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.Read(ctx, 3, 3); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("reading an entry led by a stopped bookie took %s with the default speculative timeout", took)
	}
}

// A bookie that stops answering is replaced at the add timeout, not up to
// a quarter of it later (the timer's tick): the fault suite's
// partition-broker-bookie took 12.2 s with a 10 s timeout, over issue 40's
// bound of the timeout + 1 s.
func TestStalledBookieReplacedAtTheAddTimeout(t *testing.T) {
	c := newCluster(t, 4, 9)
	const timeout = 2 * time.Second
	cl := c.client(t, Config{AddTimeout: timeout})
	ctx := ctxFor(t, 20*time.Second)
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, 3, newAcks())
	stopped := w.Metadata().Ensembles[0].Bookies[0]
	c.faults.addRule(func(id string, _ *bkproto.Request) fate {
		if id == stopped {
			return hang
		}
		return deliver
	})
	start := time.Now()
	if _, err := w.Append(ctx, []byte("waits for the stalled bookie's replacement")); err != nil { // entry 3: led by the stopped bookie
		t.Fatal(err)
	}
	if took := time.Since(start); took > timeout+300*time.Millisecond {
		t.Fatalf("an add on a stalled bookie took %s with a %s add timeout", took, timeout)
	}
}

// The timer is due at the oldest unanswered send's add timeout when that
// comes before a regular tick, and never sooner than 10 ms.
func TestNextCheckIsTheOldestSendsTimeout(t *testing.T) {
	const timeout = 10 * time.Second
	h := &WriteHandle{c: &Client{cfg: Config{AddTimeout: timeout}}, w: 2}
	t0 := time.Unix(1000, 0)
	h.mu.pending = []*pendingAdd{
		{acked: []bool{true, true}, sentTo: []string{"a", "b"}, sentAt: []time.Time{t0, t0}},
		{acked: []bool{true, false}, sentTo: []string{"a", "b"}, sentAt: []time.Time{t0, t0.Add(time.Second)}},
		{acked: []bool{false, false}, sentTo: []string{"a", "b"}, sentAt: []time.Time{t0.Add(2 * time.Second), t0.Add(2 * time.Second)}},
	}
	if got := h.nextCheckLocked(t0.Add(10 * time.Second)); got != time.Second+time.Millisecond {
		t.Errorf("next check %s before the oldest unanswered send's timeout, want 1.001s", got)
	}
	if got := h.nextCheckLocked(t0); got != h.tick() {
		t.Errorf("next check %s long before any timeout, want a tick (%s)", got, h.tick())
	}
	if got := h.nextCheckLocked(t0.Add(time.Minute)); got != 10*time.Millisecond {
		t.Errorf("next check %s past the timeout, want 10ms", got)
	}
	h.mu.pending = nil
	if got := h.nextCheckLocked(t0); got != h.tick() {
		t.Errorf("next check %s with nothing pending, want a tick", got)
	}
}

// transportHook drops the requests drop picks and passes the rest on.
type transportHook struct {
	next Transport
	drop func(bookieID string, req *bkproto.Request) bool
}

func (t transportHook) Send(id string, req *bkproto.Request, cb client.Callback) {
	if t.drop(id, req) {
		go cb(nil, fmt.Errorf("%w: bookie %s unreachable", client.ErrDisconnected, id))
		return
	}
	t.next.Send(id, req, cb)
}

// Two recoveries of one ledger can find different ends when an entry that
// was never acknowledged sits on only some replicas: one reads it and
// recovers it, the other hears first from a replica that lacks it (with
// Qw-Qa+1 = 1 that ends the ledger). Both ends hold every acknowledged
// entry; the close CAS decides, and the loser adopts the winner's end, as
// BookKeeper's recovery does. It used to fail with "closed at entry 9 by
// another client, this one ends at 10" (TestAddRacingRecovery, ~1 run in
// 40).
func TestLosingRecoveryAdoptsTheWinnersEnd(t *testing.T) {
	c := newCluster(t, 3, 31)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.client(t, Config{}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	a := newAcks()
	appendN(t, w, 10, a)
	ws := writeSet(w.Metadata(), 10)
	holder, lacker := ws[0], ws[1]
	// Entry 10 reaches holder only: the writer never hears of it from lacker.
	c.faults.addRule(func(id string, req *bkproto.Request) fate {
		if id == lacker && req.Op == bkproto.OpAdd && req.EntryID == 10 && req.Flags&bkproto.FlagRecoveryAdd == 0 {
			return hang
		}
		return deliver
	})
	var wg sync.WaitGroup
	wg.Add(1)
	w.AppendAsync(payload(w.ID(), 10), a.cb(&wg))
	waitFor(t, 5*time.Second, "entry 10 on its first replica", func() (bool, string) {
		_, err := c.nodes[holder].core.Storage().ReadEntry(w.ID(), 10)
		return err == nil, fmt.Sprint(err)
	})

	// The winner cannot reach holder for entry 10, so it ends at 9.
	winner := c.client(t, Config{Transport: transportHook{next: c.faults, drop: func(id string, req *bkproto.Request) bool {
		return id == holder && req.Op == bkproto.OpRead && req.EntryID == 10
	}}})
	// The loser recovers entry 10 (it cannot hear from lacker about it, so
	// holder's copy decides, however late it answers); the winner closes
	// the ledger while the loser writes it back.
	var winnerErr error
	var once sync.Once
	winnerRan := false
	loser := c.client(t, Config{Transport: transportHook{next: c.faults, drop: func(id string, req *bkproto.Request) bool {
		if req.Op == bkproto.OpAdd && req.EntryID == 10 && req.Flags&bkproto.FlagRecoveryAdd != 0 {
			once.Do(func() { winnerRan = true; _, winnerErr = winner.OpenRecover(ctx, w.ID(), password) })
		}
		return id == lacker && req.Op == bkproto.OpRead && req.EntryID == 10
	}}})
	r, err := loser.OpenRecover(ctx, w.ID(), password)
	if !winnerRan {
		t.Fatal("the losing recovery never wrote entry 10 back, so the winner never ran")
	}
	if winnerErr != nil {
		t.Fatalf("the winning recovery: %v", winnerErr)
	}
	if err != nil {
		t.Fatalf("the losing recovery: %v", err)
	}
	if got := r.Metadata().LastEntryID; got != 9 {
		t.Fatalf("the losing recovery's handle ends at %d, the ledger was closed at 9", got)
	}
	wg.Wait()
	checkPersistence(t, c, w.ID(), a)
}
