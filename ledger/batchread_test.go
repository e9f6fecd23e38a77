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
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// tapped is one request a tap saw.
type tapped struct {
	bookie   string
	op       bkproto.Op
	entry    int64
	maxCount uint32
}

// tap is a Transport in front of the cluster's that records requests and
// can answer them itself or alter the bookies' answers. Its hooks are set
// before use and never change.
type tap struct {
	next Transport
	// intercept may fail a request instead of delivering it (non-nil).
	intercept func(b string, req *bkproto.Request) error
	// alter may change a bookie's answer before the client sees it.
	alter func(b string, req *bkproto.Request, resp *bkproto.Response)

	mu   sync.Mutex
	sent []tapped
}

func (tp *tap) Send(b string, req *bkproto.Request, cb client.Callback) {
	tp.mu.Lock()
	tp.sent = append(tp.sent, tapped{b, req.Op, req.EntryID, req.MaxCount})
	tp.mu.Unlock()
	if tp.intercept != nil {
		if err := tp.intercept(b, req); err != nil {
			go cb(nil, err)
			return
		}
	}
	r := *req
	tp.next.Send(b, req, func(resp *bkproto.Response, err error) {
		if err == nil && tp.alter != nil {
			tp.alter(b, &r, resp)
		}
		cb(resp, err)
	})
}

// requests returns what was sent with op (to bookie b, or to any if "").
func (tp *tap) requests(op bkproto.Op, b string) []tapped {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []tapped
	for _, s := range tp.sent {
		if s.op == op && (b == "" || s.bookie == b) {
			out = append(out, s)
		}
	}
	return out
}

func (tp *tap) reset() {
	tp.mu.Lock()
	tp.sent = nil
	tp.mu.Unlock()
}

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
		tp := &tap{next: c.faults}
		got, err := readThrough(t, c, tp, tc.cfg, tc.id, 0, tc.last)
		mustEntries(t, tc.id, got, err, 0, tc.last)
		reads, batches := len(tp.requests(bkproto.OpRead, "")), len(tp.requests(bkproto.OpBatchRead, ""))
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
	tp := &tap{next: c.faults, alter: func(_ string, req *bkproto.Request, resp *bkproto.Response) {
		if req.Op == bkproto.OpBatchRead && len(resp.Entries) > 7 {
			resp.Entries = resp.Entries[:7]
		}
	}}
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 3, 499)
	mustEntries(t, w.ID(), got, err, 3, 499)
	// Each chunk in answers of 7.
	want := int64(0)
	for left, size := int64(497), chunkSize(497); left > 0; left -= size {
		want += (min(left, size) + 6) / 7
	}
	if reads, batches := len(tp.requests(bkproto.OpRead, "")), len(tp.requests(bkproto.OpBatchRead, "")); reads != 0 || int64(batches) != want {
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
	tp := &tap{next: c.faults}
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	startsAt := map[int64]bool{}
	for _, b := range tp.requests(bkproto.OpBatchRead, "") {
		startsAt[b.entry] = true
		f, end := md.ensembleAt(b.entry), md.fragmentEnd(b.entry)
		if b.entry+int64(b.maxCount)-1 > end {
			t.Errorf("batch %d+%d spans the fragment ending at %d (ensembles %+v)", b.entry, b.maxCount, end, md.Ensembles)
		}
		if !contains(f.Bookies, b.bookie) {
			t.Errorf("batch from %d sent to %s, outside its fragment %v", b.entry, b.bookie, f.Bookies)
		}
	}
	for _, f := range md.Ensembles {
		if !startsAt[f.FirstEntry] {
			t.Errorf("no batch starts at fragment start %d (batches %+v)", f.FirstEntry, tp.requests(bkproto.OpBatchRead, ""))
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
	tp := &tap{next: c.faults, intercept: func(b string, req *bkproto.Request) error {
		if b == bad && req.Op == bkproto.OpBatchRead && batches.Add(1) > 1 {
			return fmt.Errorf("%w: %s crashed", client.ErrDisconnected, b)
		}
		return nil
	}}
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 0, 999)
	mustEntries(t, w.ID(), got, err, 0, 999)
	if len(tp.requests(bkproto.OpRead, "")) == 0 {
		t.Fatal("no entry was read alone after the bookie failed")
	}
	// Once a failure is seen the bookie gets no new batches; a few were
	// in flight together. (The chunks of 1000 entries start at even
	// entries, whose write sets begin with bad.)
	if n := len(tp.requests(bkproto.OpBatchRead, bad)); n > batchesInFlight {
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
	tp := &tap{next: c.faults, alter: damage(map[string]bool{first: true})}
	got, err := readThrough(t, c, tp, Config{}, w.ID(), 0, 299)
	mustEntries(t, w.ID(), got, err, 0, 299)
	var alone []string
	for _, r := range tp.requests(bkproto.OpRead, "") {
		if r.entry == damaged {
			alone = append(alone, r.bookie)
		}
	}
	if len(alone) != 2 {
		t.Fatalf("entry %d was read alone from %v, want from both replicas", damaged, alone)
	}
	tp = &tap{next: c.faults, alter: damage(map[string]bool{ens[0]: true, ens[1]: true})}
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
	tp := &tap{next: c.faults}
	got, err := readThrough(t, c, tp, Config{}, id, 0, 299)
	mustEntries(t, id, got, err, 0, 299)
	var again bool // the short answer was followed by a request from the gap
	for _, r := range tp.requests(bkproto.OpBatchRead, "") {
		again = again || r.entry == gap
	}
	if !again || len(tp.requests(bkproto.OpRead, "")) == 0 {
		t.Fatalf("want a batch from the gap, then single reads: %+v", tp.sent)
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
	old := &tap{next: c.faults,
		intercept: func(b string, req *bkproto.Request) error {
			if b == ens[0] && req.Op == bkproto.OpBatchRead {
				return fmt.Errorf("%w: %s closed the connection", client.ErrDisconnected, b)
			}
			return nil
		},
		alter: func(b string, req *bkproto.Request, resp *bkproto.Response) {
			if b == ens[0] && req.Op == bkproto.OpInfo {
				resp.InfoFlags &^= bkproto.InfoBatchRead
			}
		}}
	got, err := readThrough(t, c, old, Config{}, w.ID(), 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	if n := len(old.requests(bkproto.OpBatchRead, ens[0])); n != 0 {
		t.Fatalf("%d batch reads sent to a bookie that does not announce them", n)
	}
	if len(old.requests(bkproto.OpBatchRead, ens[1])) == 0 || len(old.requests(bkproto.OpRead, "")) != 0 {
		t.Fatalf("the other replica did not serve the batches: %+v", old.sent)
	}

	refusing := &tap{next: c.faults, intercept: func(b string, req *bkproto.Request) error {
		if b == ens[0] && req.Op == bkproto.OpBatchRead {
			return client.StatusError(bkproto.StatusBadRequest)
		}
		return nil
	}}
	cfg := Config{Transport: refusing, SpeculativeReadTimeout: 2 * time.Second}
	cl := c.client(t, cfg)
	ctx := ctxFor(t, 30*time.Second)
	r, err := cl.OpenNoRecovery(ctx, w.ID(), password)
	if err != nil {
		t.Fatal(err)
	}
	got, err = r.Read(ctx, 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	if len(refusing.requests(bkproto.OpBatchRead, ens[0])) == 0 || len(refusing.requests(bkproto.OpRead, "")) == 0 {
		t.Fatalf("expected refused batches read entry by entry: %+v", refusing.sent)
	}
	refusing.reset()
	got, err = r.Read(ctx, 0, 599)
	mustEntries(t, w.ID(), got, err, 0, 599)
	if n, m := len(refusing.requests(bkproto.OpBatchRead, ens[0])), len(refusing.requests(bkproto.OpRead, "")); n != 0 || m != 0 {
		t.Fatalf("second read: %d batches to the refusing bookie, %d single reads; want none", n, m)
	}
}

// silentTransport counts requests and answers none of them.
type silentTransport struct{ sent atomic.Int32 }

func (s *silentTransport) Send(string, *bkproto.Request, client.Callback) { s.sent.Add(1) }

// TestBatchCaps: one OpInfo per bookie, however many ask; a bookie that
// does not answer it in time counts as not serving batch reads (and is
// not waited for longer than asked); a forgotten one is asked again.
func TestBatchCaps(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	silent := &silentTransport{}
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
	if n := silent.sent.Load(); n != 1 {
		t.Fatalf("%d OpInfo requests for one bookie", n)
	}
	time.Sleep(100 * time.Millisecond) // its timeout decides "no"
	if caps.serves(ctx, "b1", time.Second) || silent.sent.Load() != 1 {
		t.Fatalf("after the timeout: want a remembered no, %d requests", silent.sent.Load())
	}
	caps.forget("b1")
	caps.serves(ctx, "b1", 0)
	if n := silent.sent.Load(); n != 2 {
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
