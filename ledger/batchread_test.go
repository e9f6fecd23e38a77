package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// closedLedger writes n entries to a ledger with E = Qw = Qa = e and
// closes it.
func closedLedger(t *testing.T, c *cluster, e, w, n int) *WriteHandle {
	t.Helper()
	wh := createLedger(t, c.client(t, Config{}), e, w, w)
	appendN(t, wh, n, newAcks())
	if err := wh.Close(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return wh
}

// readThrough opens ledger id with a client over tr and reads first..last.
func readThrough(t *testing.T, c *cluster, tr Transport, cfg Config, id, first, last int64) ([]Entry, error) {
	t.Helper()
	cfg.Transport = tr
	if cfg.SpeculativeReadTimeout == 0 {
		// Long enough that a loaded test machine never makes a test's
		// requests differ: no speculative single reads, and the OpInfo
		// answer is always waited for.
		cfg.SpeculativeReadTimeout = 2 * time.Second
	}
	ctx := ctxFor(t, 30*time.Second)
	r, err := c.client(t, cfg).OpenNoRecovery(ctx, id, password)
	if err != nil {
		t.Fatal(err)
	}
	return r.Read(ctx, first, last)
}

func mustEntries(t *testing.T, id int64, got []Entry, err error, first, last int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("read %d..%d: %v", first, last, err)
	}
	if len(got) != int(last-first+1) {
		t.Fatalf("read %d..%d: %d entries", first, last, len(got))
	}
	for i, e := range got {
		want := first + int64(i)
		if e.EntryID != want || !bytes.Equal(e.Payload, payload(id, want)) {
			t.Fatalf("read %d..%d: position %d holds entry %d %q, want entry %d", first, last, i, e.EntryID, e.Payload, want)
		}
	}
}

// TestBatchReadFewRequests: a 1000-entry read of a ledger every bookie
// holds whole takes a handful of requests, not one per entry; with batch
// reads off, or a striped ensemble, it is one per entry.
func TestBatchReadFewRequests(t *testing.T) {
	c := newCluster(t, 3, 21)
	whole := closedLedger(t, c, 2, 2, 1000)
	striped := closedLedger(t, c, 3, 2, 300)
	cases := []struct {
		name              string
		id, last          int64
		cfg               Config
		reads, maxBatches int
	}{
		{"batched", whole.ID(), 999, Config{}, 0, 8},
		{"disabled", whole.ID(), 999, Config{DisableBatchRead: true}, 1000, 0},
		{"striped", striped.ID(), 299, Config{}, 300, 0},
	}
	for _, tc := range cases {
		tp := fault.NewTransport(c.faults)
		got, err := readThrough(t, c, tp, tc.cfg, tc.id, 0, tc.last)
		mustEntries(t, tc.id, got, err, 0, tc.last)
		reads, batches := len(tp.Requests("", bkproto.OpRead)), len(tp.Requests("", bkproto.OpBatchRead))
		if (tc.reads == 0) != (reads == 0) || reads < tc.reads || batches > tc.maxBatches || (tc.maxBatches > 0 && batches == 0) {
			t.Errorf("%s: %d entries took %d single and %d batch reads, want %d (or more) single and at most %d batch reads",
				tc.name, tc.last+1, reads, batches, tc.reads, tc.maxBatches)
		}
	}
}

// TestBatchReadShortAnswers: whatever an answer leaves out is asked for
// again from where it stopped.
func TestBatchReadShortAnswers(t *testing.T) {
	c := newCluster(t, 2, 22)
	w := closedLedger(t, c, 2, 2, 500)
	tp := fault.NewTransport(c.faults)
	tp.Inject(fault.Fault{Op: bkproto.OpBatchRead, Action: fault.Alter, Alter: func(_ string, _ *bkproto.Request, resp *bkproto.Response) {
		if len(resp.Entries) > 7 {
			resp.Entries = resp.Entries[:7]
		}
	}})
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 3, 499)
	mustEntries(t, w.ID(), got, err, 3, 499)
	// Each chunk in answers of 7.
	want := int64(0)
	for left, size := int64(497), chunkSize(497); left > 0; left -= size {
		want += (min(left, size) + 6) / 7
	}
	if reads, batches := len(tp.Requests("", bkproto.OpRead)), len(tp.Requests("", bkproto.OpBatchRead)); reads != 0 || int64(batches) != want {
		t.Fatalf("497 entries in answers of 7: %d single and %d batch reads, want 0 and %d", reads, batches, want)
	}
}

// TestBatchReadAcrossEnsembleChange: batches never span fragments, and
// each goes to a bookie of its own fragment.
func TestBatchReadAcrossEnsembleChange(t *testing.T) {
	c := newCluster(t, 4, 23)
	ctx := ctxFor(t, 30*time.Second)
	w := createLedger(t, c.client(t, Config{AddTimeout: 500 * time.Millisecond}), 2, 2, 2)
	a := newAcks()
	appendN(t, w, 300, a)
	victim := w.Metadata().Ensembles[0].Bookies[1]
	c.stopBookie(victim)
	appendN(t, w, 300, a)
	c.startBookie(victim) // its copies of the first fragment are readable again
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	md := w.Metadata()
	if len(md.Ensembles) < 2 {
		t.Fatalf("no ensemble change: %+v", md.Ensembles)
	}
	tp := fault.NewTransport(c.faults)
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	startsAt := map[int64]bool{}
	for _, b := range tp.Requests("", bkproto.OpBatchRead) {
		startsAt[b.EntryID] = true
		f, end := md.ensembleAt(b.EntryID), md.fragmentEnd(b.EntryID)
		if b.EntryID+int64(b.MaxCount)-1 > end {
			t.Errorf("batch %d+%d spans the fragment ending at %d (ensembles %+v)", b.EntryID, b.MaxCount, end, md.Ensembles)
		}
		if !contains(f.Bookies, b.Bookie) {
			t.Errorf("batch from %d sent to %s, outside its fragment %v", b.EntryID, b.Bookie, f.Bookies)
		}
	}
	for _, f := range md.Ensembles {
		if !startsAt[f.FirstEntry] {
			t.Errorf("no batch starts at fragment start %d (batches %+v)", f.FirstEntry, tp.Requests("", bkproto.OpBatchRead))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBatchReadBookieFailsMidRead: a bookie whose connection breaks after
// its first batch is left for the rest of the Read; what its failed
// batches would have brought is read entry by entry, from either replica.
func TestBatchReadBookieFailsMidRead(t *testing.T) {
	c := newCluster(t, 2, 24)
	w := closedLedger(t, c, 2, 2, 1000)
	bad := w.Metadata().Ensembles[0].Bookies[0]
	var batches atomic.Int32
	tp := fault.NewTransport(c.faults)
	tp.Inject(fault.Fault{Bookie: bad, Op: bkproto.OpBatchRead, Action: fault.Fail,
		Match: func(string, *bkproto.Request) bool { return batches.Add(1) > 1 },
		Err:   fmt.Errorf("%w: %s crashed", client.ErrDisconnected, bad)})
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 0, 999)
	mustEntries(t, w.ID(), got, err, 0, 999)
	if len(tp.Requests("", bkproto.OpRead)) == 0 {
		t.Fatal("no entry was read alone after the bookie failed")
	}
	// Once a failure is seen the bookie gets no new batches; a few were
	// in flight together. (The chunks of 1000 entries start at even
	// entries, whose write sets begin with bad.)
	if n := len(tp.Requests(bad, bkproto.OpBatchRead)); n > batchesInFlight {
		t.Fatalf("%d batches went to the failed bookie", n)
	}
}

// TestBatchReadDigestMismatch: an entry damaged in a batch answer is
// caught by its digest and read alone, from the other replica when the
// first one's copy is damaged too; damaged on every replica it is reported
// as a digest mismatch, never as missing.
func TestBatchReadDigestMismatch(t *testing.T) {
	c := newCluster(t, 2, 25)
	w := closedLedger(t, c, 2, 2, 300)
	ens := w.Metadata().Ensembles[0].Bookies
	const damaged = 100
	// damage spoils entry 100 in every batch answer, and in single-entry
	// answers from the bookies in single.
	damage := func(single map[string]bool) func(string, *bkproto.Request, *bkproto.Response) {
		return func(b string, req *bkproto.Request, resp *bkproto.Response) {
			flip := func(d []byte) []byte { d = append([]byte(nil), d...); d[len(d)-1] ^= 0xff; return d }
			switch {
			case req.Op == bkproto.OpBatchRead && req.EntryID <= damaged && damaged < req.EntryID+int64(len(resp.Entries)):
				resp.Entries[damaged-req.EntryID] = flip(resp.Entries[damaged-req.EntryID])
			case req.Op == bkproto.OpRead && req.EntryID == damaged && single[b]:
				resp.Data = flip(resp.Data)
			}
		}
	}
	first := writeSet(w.Metadata(), damaged)[0] // a single read asks it first
	tp := fault.NewTransport(c.faults)
	tp.Inject(fault.Fault{Action: fault.Alter, Alter: damage(map[string]bool{first: true})})
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 0, 299)
	mustEntries(t, w.ID(), got, err, 0, 299)
	var alone []string
	for _, r := range tp.Requests("", bkproto.OpRead) {
		if r.EntryID == damaged {
			alone = append(alone, r.Bookie)
		}
	}
	if len(alone) != 2 {
		t.Fatalf("entry %d was read alone from %v, want from both replicas", damaged, alone)
	}
	tp = fault.NewTransport(c.faults)
	tp.Inject(fault.Fault{Action: fault.Alter, Alter: damage(map[string]bool{ens[0]: true, ens[1]: true})})
	_, err = readThrough(t, c, tp, Config{}, w.ID(), 0, 299)
	if !errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrNoEntry) {
		t.Fatalf("read with entry %d damaged everywhere: %v, want ErrDigestMismatch (not ErrNoEntry)", damaged, err)
	}
}

// missingStorage lacks chosen entries (as a bookie that lost an add).
type missingStorage struct {
	entrylog.Storage
	missing func(ledgerID, entryID int64) bool
}

func (s *missingStorage) ReadEntry(l, e int64) ([]byte, error) {
	if s.missing(l, e) {
		return nil, fmt.Errorf("ledger %d entry %d: %w", l, e, entrylog.ErrNoEntry)
	}
	return s.Storage.ReadEntry(l, e)
}

// TestBatchReadGap: replicas that lack an entry answer batches up to it
// ("no such entry" when asked from it); the entry comes from the replica
// that has it. Missing everywhere, the Read fails with ErrNoEntry.
func TestBatchReadGap(t *testing.T) {
	c := newCluster(t, 3, 26)
	w := closedLedger(t, c, 3, 3, 300)
	id, md := w.ID(), w.Metadata()
	const gap = 100
	lose := func(b string) {
		c.stopBookie(b)
		c.nodes[b].wrap = func(s entrylog.Storage) entrylog.Storage {
			return &missingStorage{Storage: s, missing: func(l, e int64) bool { return l == id && e == gap }}
		}
		c.startBookie(b)
	}
	// Lost by the bookie that gets the batch holding the gap and by the
	// one asked again from the gap.
	size := chunkSize(300)
	lost := map[string]bool{writeSet(md, gap/size*size)[0]: true, writeSet(md, gap)[0]: true}
	if len(lost) != 2 {
		t.Fatalf("chunks changed: the batch holding %d starts at %d, on the bookie that comes first for %d", gap, gap/size*size, gap)
	}
	for b := range lost {
		lose(b)
	}
	tp := fault.NewTransport(c.faults)
	got, err := readThrough(t, c, tp, Config{}, id, 0, 299)
	mustEntries(t, id, got, err, 0, 299)
	var again bool // the short answer was followed by a request from the gap
	for _, r := range tp.Requests("", bkproto.OpBatchRead) {
		again = again || r.EntryID == gap
	}
	if !again || len(tp.Requests("", bkproto.OpRead)) == 0 {
		t.Fatalf("want a batch from the gap, then single reads: %+v", tp.Requests("", 0))
	}
	for _, b := range md.Ensembles[0].Bookies {
		if !lost[b] {
			lose(b)
		}
	}
	if _, err := readThrough(t, c, c.faults, Config{}, id, 0, 299); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("read with entry %d on no replica: %v, want ErrNoEntry", gap, err)
	}
}

// TestBatchReadOlderBookies: a bookie of a build before batch reads
// (OpInfo without InfoBatchRead; it would close the connection on the op)
// never gets one; a bookie that refuses the op is asked no more.
func TestBatchReadOlderBookies(t *testing.T) {
	c := newCluster(t, 2, 27)
	w := closedLedger(t, c, 2, 2, 600)
	ens := w.Metadata().Ensembles[0].Bookies
	old := fault.NewTransport(c.faults)
	old.Inject(fault.Fault{Bookie: ens[0], Op: bkproto.OpBatchRead, Action: fault.Fail,
		Err: fmt.Errorf("%w: %s closed the connection", client.ErrDisconnected, ens[0])})
	old.Inject(fault.Fault{Bookie: ens[0], Op: bkproto.OpInfo, Action: fault.Alter,
		Alter: func(_ string, _ *bkproto.Request, resp *bkproto.Response) { resp.InfoFlags &^= bkproto.InfoBatchRead }})
	got, err := readThrough(t, c, old, Config{}, w.ID(), 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	if n := len(old.Requests(ens[0], bkproto.OpBatchRead)); n != 0 {
		t.Fatalf("%d batch reads sent to a bookie that does not announce them", n)
	}
	if len(old.Requests(ens[1], bkproto.OpBatchRead)) == 0 || len(old.Requests("", bkproto.OpRead)) != 0 {
		t.Fatalf("the other replica did not serve the batches: %+v", old.Requests("", 0))
	}

	refusing := fault.NewTransport(c.faults)
	refusing.Inject(fault.Fault{Bookie: ens[0], Op: bkproto.OpBatchRead, Action: fault.Fail,
		Err: client.StatusError(bkproto.StatusBadRequest)})
	cfg := Config{Transport: refusing, SpeculativeReadTimeout: 2 * time.Second}
	cl := c.client(t, cfg)
	ctx := ctxFor(t, 30*time.Second)
	r, err := cl.OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	got, err = r.Read(ctx, 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	if len(refusing.Requests(ens[0], bkproto.OpBatchRead)) == 0 || len(refusing.Requests("", bkproto.OpRead)) == 0 {
		t.Fatalf("expected refused batches read entry by entry: %+v", refusing.Requests("", 0))
	}
	refusing.Reset()
	got, err = r.Read(ctx, 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	if n, m := len(refusing.Requests(ens[0], bkproto.OpBatchRead)), len(refusing.Requests("", bkproto.OpRead)); n != 0 || m != 0 {
		t.Fatalf("second read: %d batches to the refusing bookie, %d single reads; want none", n, m)
	}
}

// TestBatchCaps: one OpInfo per bookie, however many ask; a bookie that
// does not answer it in time counts as not serving batch reads (and is
// not waited for longer than asked); a forgotten one is asked again.
func TestBatchCaps(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	silent := fault.NewTransport(nil) // answers nothing: every request hangs
	silent.Inject(fault.Fault{Action: fault.Hang})
	caps := newBatchCaps(silent, 50*time.Millisecond)
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if caps.serves(ctx, "b1", 10*time.Millisecond) {
				t.Error("a bookie that never answered serves batch reads")
			}
		}()
	}
	wg.Wait()
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("waited %v for an unanswered OpInfo", waited)
	}
	if n := silent.Count("", 0); n != 1 {
		t.Fatalf("%d OpInfo requests for one bookie", n)
	}
	time.Sleep(100 * time.Millisecond) // its timeout decides "no"
	if caps.serves(ctx, "b1", time.Second) || silent.Count("", 0) != 1 {
		t.Fatalf("after the timeout: want a remembered no, %d requests", silent.Count("", 0))
	}
	caps.forget("b1")
	caps.serves(ctx, "b1", 0)
	if n := silent.Count("", 0); n != 2 {
		t.Fatalf("a forgotten bookie was asked %d times in all, want 2", n)
	}

	c := newCluster(t, 1, 28)
	yes := newBatchCaps(c.faults, time.Second)
	if !yes.serves(ctx, "bookie-0", time.Second) {
		t.Fatal("a bookie of this build does not announce batch reads")
	}
	yes.refused("bookie-0")
	if yes.serves(ctx, "bookie-0", time.Second) {
		t.Fatal("a bookie that refused a batch read still counts as serving them")
	}
}
