package txn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
)

// recordingEnder records every end and fails the first attempts on each
// target as asked.
type recordingEnder struct {
	mu       sync.Mutex
	failures int // attempts to fail per target before succeeding
	tries    map[string]int
	ends     map[ID]map[string]bool // txn -> target -> commit
	mixed    []string               // a txn ended both ways somewhere
}

func newRecordingEnder(failures int) *recordingEnder {
	return &recordingEnder{failures: failures, tries: map[string]int{}, ends: map[ID]map[string]bool{}}
}

func (e *recordingEnder) end(target string, id ID, commit bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := id.String() + target
	e.tries[key]++
	if e.tries[key] <= e.failures {
		return errors.New("injected: owner unreachable")
	}
	if e.ends[id] == nil {
		e.ends[id] = map[string]bool{}
	}
	for t, c := range e.ends[id] {
		if c != commit {
			e.mixed = append(e.mixed, fmt.Sprintf("%v on %s and %s", id, t, target))
		}
	}
	e.ends[id][target] = commit
	return nil
}

func (e *recordingEnder) EndPartition(_ context.Context, topic string, id ID, commit bool) error {
	return e.end("p:"+topic, id, commit)
}

func (e *recordingEnder) EndSubscription(_ context.Context, s Subscription, id ID, commit bool) error {
	return e.end("s:"+s.Topic+"/"+s.Name, id, commit)
}

func (e *recordingEnder) endedOn(id ID) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]bool{}
	for t, c := range e.ends[id] {
		out[t] = c
	}
	return out
}

// count is how many times id was ended, over all its targets.
func (e *recordingEnder) count(id ID) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for key, tries := range e.tries {
		if strings.HasPrefix(key, id.String()) {
			n += tries
		}
	}
	return n
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// modelTxn is what the test expects of a transaction.
type modelTxn struct {
	status Status
	parts  []string
	subs   []Subscription
	// logged: a record of it is in the log (New writes none; any append
	// of the coordinator takes the waiting ones along).
	logged bool
}

// allLogged notes an append that landed: every open transaction's record
// rode it.
func allLogged(model map[ID]*modelTxn) {
	for _, m := range model {
		if m.status == Open {
			m.logged = true
		}
	}
}

// TestCoordinatorModel drives coordinators with random operations,
// injected log failures (then recovery from the log), ender failures and
// timeouts, checking them against a model: a committed transaction was
// committed on every partition and subscription it had, an aborted one
// aborted everywhere, none both; ended transactions are unknown; the
// recovered open set is the model's; ids are never issued twice.
func TestCoordinatorModel(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	log := &MemoryLog{}
	ender := newRecordingEnder(int(seed % 3))
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	cfg := Config{ID: 3, Log: log, Ender: ender, Now: clock.Now, RetryDelay: time.Millisecond}
	c := mustRecover(t, cfg)
	model := map[ID]*modelTxn{}
	issued := map[ID]bool{}
	var ids []ID
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(10); {
		case op < 2:
			id, err := c.New(time.Duration(1+rng.IntN(5)) * time.Second)
			if err != nil {
				t.Fatalf("step %d: new: %v", step, err)
			}
			if issued[id] || id.Most != 3 {
				t.Fatalf("step %d: id %v issued twice or of another coordinator", step, id)
			}
			issued[id] = true
			model[id] = &modelTxn{status: Open}
			ids = append(ids, id)
		case op < 4 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			p := fmt.Sprint("persistent://t/n/p-", rng.IntN(4))
			checkAnswer(t, step, "add partition", c.AddPartitions(id, []string{p}), model[id])
			if m := model[id]; m.status == Open && !slices.Contains(m.parts, p) {
				m.parts = append(m.parts, p)
				allLogged(model)
			}
		case op < 5 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			s := Subscription{Topic: fmt.Sprint("persistent://t/n/s-", rng.IntN(3)), Name: "sub"}
			checkAnswer(t, step, "add subscription", c.AddSubscriptions(id, []Subscription{s}), model[id])
			if m := model[id]; m.status == Open && !slices.Contains(m.subs, s) {
				m.subs = append(m.subs, s)
				allLogged(model)
			}
		case op < 7 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			commit := rng.IntN(2) == 0
			if endInModel(t, step, c, ender, model[id], id, commit) {
				allLogged(model)
			}
		case op < 8 && rng.IntN(4) == 0:
			c.Flush()
			waitLanded(t, c)
			allLogged(model)
		case op < 8:
			clock.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			expireInModel(t, c, ender, model, clock.Now())
		case op < 9:
			if err := c.Trim(context.Background()); err != nil {
				t.Fatalf("step %d: trim: %v", step, err)
			}
		default:
			c = crashAndRecover(t, rng, c, cfg, log, ender, model, ids, issued)
		}
	}
	if len(ender.mixed) > 0 {
		t.Fatalf("transactions ended both ways: %v", ender.mixed)
	}
}

func mustRecover(t *testing.T, cfg Config) *Coordinator {
	t.Helper()
	c, err := Recover(context.Background(), cfg)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// checkAnswer checks an Add's answer against the transaction's state.
func checkAnswer(t *testing.T, step int, what string, err error, m *modelTxn) {
	t.Helper()
	switch {
	case m.status == Open && err != nil:
		t.Fatalf("step %d: %s on an open transaction: %v", step, what, err)
	case m.status.ended() && !errors.Is(err, ErrNotFound):
		t.Fatalf("step %d: %s on an ended transaction answered %v, want not found", step, what, err)
	}
}

// endInModel ends id in the coordinator and the model; true when that
// appended a record.
func endInModel(t *testing.T, step int, c *Coordinator, ender *recordingEnder, m *modelTxn, id ID, commit bool) bool {
	t.Helper()
	err := c.End(context.Background(), id, commit)
	if m.status.ended() {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("step %d: end of ended %v answered %v, want not found", step, id, err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("step %d: end %v (commit %v): %v", step, id, commit, err)
	}
	m.status = map[bool]Status{true: Committed, false: Aborted}[commit]
	checkEndedEverywhere(t, ender, m, id, commit)
	if _, err := c.Get(id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("step %d: %v still known after it ended: %v", step, id, err)
	}
	return true
}

func checkEndedEverywhere(t *testing.T, ender *recordingEnder, m *modelTxn, id ID, commit bool) {
	t.Helper()
	got := ender.endedOn(id)
	for _, p := range m.parts {
		if c, ok := got["p:"+p]; !ok || c != commit {
			t.Fatalf("%v ended (commit %v) but partition %s got %v (ended %v)", id, commit, p, c, ok)
		}
	}
	for _, s := range m.subs {
		if c, ok := got["s:"+s.Topic+"/"+s.Name]; !ok || c != commit {
			t.Fatalf("%v ended (commit %v) but subscription %v got %v (ended %v)", id, commit, s, c, ok)
		}
	}
}

// expireInModel aborts the model's late transactions and waits for the
// coordinator to have done the same.
func expireInModel(t *testing.T, c *Coordinator, ender *recordingEnder, model map[ID]*modelTxn, now time.Time) {
	t.Helper()
	if c.Expire() > 0 {
		defer allLogged(model) // each abort's ABORTING record took the waiting ones along
	}
	for id, m := range model {
		if m.status != Open {
			continue
		}
		meta, err := c.Get(id)
		if err == nil && !now.After(meta.Deadline()) {
			continue
		}
		waitGone(t, c, id)
		m.status = Aborted
		checkEndedEverywhere(t, ender, m, id, false)
	}
}

func waitGone(t *testing.T, c *Coordinator, id ID) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := c.Get(id); errors.Is(err, ErrNotFound) {
			return
		}
	}
	t.Fatalf("%v was not ended", id)
}

// crashAndRecover fails the log under an operation (sometimes an End,
// whose first record may or may not land), then recovers a coordinator
// from the log and compares its open transactions with the model.
func crashAndRecover(t *testing.T, rng *rand.Rand, c *Coordinator, cfg Config, log *MemoryLog,
	ender *recordingEnder, model map[ID]*modelTxn, ids []ID, issued map[ID]bool) *Coordinator {
	t.Helper()
	var open []ID
	for _, id := range ids {
		if model[id].status == Open {
			open = append(open, id)
		}
	}
	if len(open) > 0 && rng.IntN(2) == 0 {
		id := open[rng.IntN(len(open))]
		commit := rng.IntN(2) == 0
		log.SetFail(errors.New("injected: bookies gone"))
		if err := c.End(context.Background(), id, commit); err == nil {
			t.Fatalf("end of %v succeeded with the log failing", id)
		}
	}
	log.SetFail(errors.New("injected: crash"))
	// New answers before its record is durable: the record (flushed) is
	// lost, the coordinator fails, and the id is never issued again.
	lost, err := c.New(time.Second)
	if err == nil {
		issued[lost] = true
		c.Flush()
		for deadline := time.Now().Add(5 * time.Second); c.Failed() == nil; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the coordinator did not fail after its log refused a record")
			}
		}
	}
	c.Close()
	log.SetFail(nil)
	c = mustRecover(t, cfg)
	checkRecovered(t, c, ender, model)
	if _, err := c.Get(lost); err == nil && lost.Least != 0 {
		t.Fatalf("%v, whose record was lost, is known after recovery", lost)
	}
	return c
}

func checkRecovered(t *testing.T, c *Coordinator, ender *recordingEnder, model map[ID]*modelTxn) {
	t.Helper()
	live := map[ID]Meta{}
	for _, m := range c.List() {
		live[m.ID] = m
	}
	for id, m := range model {
		if m.status.ended() {
			// Its final record may have been waiting for a ride when the
			// log failed: then it is ending again, the same way.
			if meta, ok := live[id]; ok {
				want := map[Status]Status{Committed: Committing, Aborted: Aborting}[m.status]
				if meta.Status != want {
					t.Fatalf("ended (%v) %v is live again after recovery as %v", m.status, id, meta.Status)
				}
				waitGone(t, c, id)
			}
			continue
		}
		meta, ok := live[id]
		if !ok && !m.logged {
			// Opened, never logged (nothing added to it): unknown now,
			// as if it had ended with nothing to end.
			m.status = Aborted
			continue
		}
		if !ok {
			t.Fatalf("open %v lost in recovery", id)
		}
		if !slices.Equal(meta.Partitions, m.parts) || !slices.Equal(meta.Subs, m.subs) {
			t.Fatalf("%v recovered with %v %v, want %v %v", id, meta.Partitions, meta.Subs, m.parts, m.subs)
		}
		if meta.Status == Open {
			continue
		}
		// Its End's first record landed before the failure: recovery
		// ends it that way.
		commit := meta.Status == Committing
		waitGone(t, c, id)
		m.status = map[bool]Status{true: Committed, false: Aborted}[commit]
		checkEndedEverywhere(t, ender, m, id, commit)
	}
}

// A record survives encoding; garbage is a corruption, never a panic.
func TestRecordRoundTrip(t *testing.T) {
	m := Meta{ID: ID{2, 99}, Status: Committing, Start: time.UnixMilli(1234), Timeout: 5 * time.Second,
		Partitions: []string{"a", "b"}, Subs: []Subscription{{"a", "s"}}, LastModified: time.UnixMilli(5678)}
	got, err := decode(2, encode(m))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(m) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	if _, err := decode(2, []byte{0x08}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated record: %v", err)
	}
	if _, err := decode(2, []byte{0x10, 0x09}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("status 9: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encode(Meta{ID: ID{1, 7}, Partitions: []string{"x"}, Subs: []Subscription{{"x", "y"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(1, b)
		if err == nil {
			if _, err := decode(1, encode(m)); err != nil {
				t.Fatalf("re-encoded record does not decode: %v", err)
			}
		}
	})
}

// Trimming keeps what live transactions need and the sequence: a
// coordinator recovered from a trimmed log issues new ids.
func TestTrimKeepsSequence(t *testing.T) {
	log := &MemoryLog{}
	cfg := Config{ID: 0, Log: log, Ender: newRecordingEnder(0)}
	c := mustRecover(t, cfg)
	var last ID
	for range 5 {
		id, err := c.New(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.End(context.Background(), id, true); err != nil {
			t.Fatal(err)
		}
		last = id
	}
	open, _ := c.New(time.Minute)
	c.Flush() // New's record waits for a ride; Flush gives it one
	for deadline := time.Now().Add(5 * time.Second); log.Len() != 1; time.Sleep(time.Millisecond) {
		if err := c.Trim(context.Background()); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("log keeps %d records after trim, want 1 (the open transaction's)", log.Len())
		}
	}
	c.Close()
	c = mustRecover(t, cfg)
	if _, err := c.Get(open); err != nil {
		t.Fatalf("open transaction lost: %v", err)
	}
	id, err := c.New(time.Minute)
	if err != nil || id.Least <= open.Least || id.Least <= last.Least {
		t.Fatalf("new id %v after recovery (err %v), want above %v", id, err, open)
	}
}

// blockingEnder holds every end until released.
type blockingEnder struct{ release chan struct{} }

func (e blockingEnder) EndPartition(ctx context.Context, _ string, _ ID, _ bool) error {
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e blockingEnder) EndSubscription(ctx context.Context, _ Subscription, id ID, c bool) error {
	return e.EndPartition(ctx, "", id, c)
}

// While a commit runs, an abort is InvalidStatus, a second commit waits
// for the first, and adding to the transaction is InvalidStatus.
func TestEndWhileEnding(t *testing.T) {
	ender := blockingEnder{release: make(chan struct{})}
	c := mustRecover(t, Config{ID: 1, Log: &MemoryLog{}, Ender: ender})
	id, err := c.New(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions(id, []string{"p"}); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- c.End(context.Background(), id, true) }()
	for {
		if m, _ := c.Get(id); m.Status == Committing {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.End(context.Background(), id, false); !errors.Is(err, ErrInvalidStatus) {
		t.Fatalf("abort while committing: %v, want invalid status", err)
	}
	if err := c.AddPartitions(id, []string{"q"}); !errors.Is(err, ErrInvalidStatus) {
		t.Fatalf("add while committing: %v, want invalid status", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.End(ctx, id, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second commit before the first ended: %v, want it to wait", err)
	}
	close(ender.release)
	if err := <-first; err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// Records ride together: New's record waits for the next append of the
// coordinator, and a final (COMMITTED, ABORTED) record for the one after
// its ending; so a transaction opened, given a partition and committed
// takes two log entries, not four.
func TestRecordsRideTogether(t *testing.T) {
	log := &MemoryLog{}
	ender := newRecordingEnder(0)
	cfg := Config{ID: 4, Log: log, Ender: ender}
	c := mustRecover(t, cfg)
	ids := newTxns(t, c, 10)
	if n := log.Len(); n != 0 {
		t.Fatalf("%d log entries after 10 News, want 0 (their records wait for a ride)", n)
	}
	for i, id := range ids {
		if err := c.AddPartitions(id, []string{fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := log.Len(); n != 10 {
		t.Fatalf("%d log entries after 10 News and 10 partitions added, want 10", n)
	}
	for _, id := range ids {
		if err := c.End(context.Background(), id, true); err != nil {
			t.Fatal(err)
		}
	}
	if n := log.Len(); n != 20 {
		t.Fatalf("%d log entries after 10 commits, want 20 (each COMMITTING carries the last one's COMMITTED)", n)
	}
	// Recovered now, only the last transaction (its COMMITTED still
	// waiting) is ended again.
	c.Close()
	c = mustRecover(t, cfg)
	waitGone(t, c, ids[9])
	if got := c.List(); len(got) != 0 {
		t.Fatalf("live after recovery: %v", got)
	}
	if got := ender.count(ids[9]); got != 2 {
		t.Fatalf("%v ended %d times, want twice: its COMMITTED record was not written, so recovery ends it again", ids[9], got)
	}
	for _, id := range ids[:9] {
		if got := ender.count(id); got != 1 {
			t.Fatalf("%v ended %d times, want once: its COMMITTED record rode the next entry", id, got)
		}
	}
}

// Flush writes the records waiting for a ride: an open transaction
// without a partition survives a crash once flushed.
func TestFlushKeepsOpenTransaction(t *testing.T) {
	log := &MemoryLog{}
	cfg := Config{ID: 5, Log: log, Ender: newRecordingEnder(0)}
	c := mustRecover(t, cfg)
	id, err := c.New(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Flush()
	for deadline := time.Now().Add(5 * time.Second); log.Len() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log has %d entries after Flush, want 1", log.Len())
		}
	}
	c.Flush() // nothing waits: no entry
	c.Close()
	if n := log.Len(); n != 1 {
		t.Fatalf("log has %d entries after a second Flush with nothing waiting, want 1", n)
	}
	c = mustRecover(t, cfg)
	if m, err := c.Get(id); err != nil || m.Status != Open {
		t.Fatalf("flushed open transaction after recovery: %+v, %v", m, err)
	}
}

// An entry of several records decodes to each of them; garbage is a
// corruption, never a panic.
func TestEntryRoundTrip(t *testing.T) {
	a := Meta{ID: ID{2, 1}, Status: Open, Start: time.UnixMilli(1), Timeout: time.Second, LastModified: time.UnixMilli(1)}
	b := Meta{ID: ID{2, 2}, Status: Committed, Start: time.UnixMilli(2), Timeout: time.Second,
		Partitions: []string{"x"}, LastModified: time.UnixMilli(3)}
	for _, recs := range [][]Meta{{a}, {a, b}, {b, a, b}} {
		var enc [][]byte
		for _, m := range recs {
			enc = append(enc, encode(m))
		}
		got, err := decodeEntry(2, encodeEntry(enc))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(recs) {
			t.Fatalf("decoded %+v, want %+v", got, recs)
		}
	}
	if _, err := decodeEntry(2, []byte{byte(fBatch<<3 | 2), 5, 0x08}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated batch: %v", err)
	}
	bad := append(encodeEntry([][]byte{encode(a), encode(b)}), 0x08, 0x01)
	if _, err := decodeEntry(2, bad); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("batch with a stray field: %v", err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	one := encode(Meta{ID: ID{1, 7}, Partitions: []string{"x"}})
	f.Add(one)
	f.Add(encodeEntry([][]byte{one, encode(Meta{ID: ID{1, 8}, Status: Aborted})}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := decodeEntry(1, b)
		if err != nil {
			return
		}
		var enc [][]byte
		for _, m := range ms {
			enc = append(enc, encode(m))
		}
		again, err := decodeEntry(1, encodeEntry(enc))
		if err != nil || len(again) != len(ms) {
			t.Fatalf("re-encoded entry of %d records: %d, %v", len(ms), len(again), err)
		}
	})
}

// TryNew issues an id only when one is reserved (New reserves a block
// first, a write TryNew must not wait for), and never the same one twice.
func TestTryNewOnlyWithReservedIDs(t *testing.T) {
	log := &MemoryLog{}
	c := mustRecover(t, Config{ID: 6, Log: log, Ender: newRecordingEnder(0)})
	if _, done, err := c.TryNew(time.Minute); done || err != nil {
		t.Fatalf("TryNew with no id reserved: done %v, err %v; want not done", done, err)
	}
	first, err := c.New(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[ID]bool{first: true}
	for range sequenceBlock - 1 {
		id, done, err := c.TryNew(time.Minute)
		if !done || err != nil || seen[id] {
			t.Fatalf("TryNew within the reserved block: %v, done %v, err %v (seen %v)", id, done, err, seen[id])
		}
		seen[id] = true
	}
	if _, done, _ := c.TryNew(time.Minute); done {
		t.Fatalf("TryNew past the %d reserved ids issued one", sequenceBlock)
	}
	if log.SavedSequence() != sequenceBlock {
		t.Fatalf("saved sequence %d, want %d: TryNew must not reserve", log.SavedSequence(), sequenceBlock)
	}
	c.Close()
	if _, done, err := c.TryNew(time.Minute); !done || !errors.Is(err, ErrClosed) {
		t.Fatalf("TryNew on a closed coordinator: done %v, err %v; want ErrClosed", done, err)
	}
}

// heldLog is a MemoryLog whose appends land at once but are answered
// only when released, as a managed ledger's are while its bookies write.
type heldLog struct {
	*MemoryLog
	mu   sync.Mutex
	held []func()
}

func (l *heldLog) Append(rec []byte, cb func(managedledger.Position, error)) {
	l.MemoryLog.Append(rec, func(pos managedledger.Position, err error) {
		l.mu.Lock()
		l.held = append(l.held, func() { cb(pos, err) })
		l.mu.Unlock()
	})
}

// release answers the appends held so far, in order.
func (l *heldLog) release() {
	l.mu.Lock()
	held := l.held
	l.held = nil
	l.mu.Unlock()
	for _, answer := range held {
		answer()
	}
}

// heldFail is a log whose appends wait, as heldLog's, and are then
// answered with a failure (the record may or may not be in the log, as
// after a bookie's timeout).
type heldFail struct {
	*MemoryLog
	mu   sync.Mutex
	held []func(managedledger.Position, error)
}

func (l *heldFail) Append(rec []byte, cb func(managedledger.Position, error)) {
	l.MemoryLog.Append(rec, func(managedledger.Position, error) {})
	l.mu.Lock()
	l.held = append(l.held, cb)
	l.mu.Unlock()
}

func (l *heldFail) fail(err error) {
	l.mu.Lock()
	held := l.held
	l.held = nil
	l.mu.Unlock()
	for _, cb := range held {
		cb(managedledger.Position{}, err)
	}
}

// Changes made while the log writes an entry share the next one (group
// commit): ten transactions given a partition while the first one's
// record is being written cost the log two entries, not ten.
func TestChangesWaitingForTheLogShareOneEntry(t *testing.T) {
	log := &heldLog{MemoryLog: &MemoryLog{}}
	cfg := Config{ID: 6, Log: log, Ender: newRecordingEnder(0)}
	c := mustRecover(t, cfg)
	ids := newTxns(t, c, 10)
	errs := make(chan error, len(ids))
	add := func(i int) { errs <- c.AddPartitions(ids[i], []string{fmt.Sprint("p", i)}) }
	go add(0)
	waitFor(t, "the first change's entry", func() bool { return log.Len() == 1 })
	for i := 1; i < len(ids); i++ {
		go add(i)
	}
	waitFor(t, "the other nine changes to wait for the log", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return log.Len() > 1 || (c.next != nil && len(c.next.recs) == len(ids)-1)
	})
	if n := log.Len(); n != 1 {
		t.Fatalf("%d log entries while the first was being written, want 1 (the other changes wait for it)", n)
	}
	for answered := 0; answered < len(ids); {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			answered++
		default:
			log.release()
			time.Sleep(time.Millisecond)
		}
	}
	if n := log.Len(); n != 2 {
		t.Fatalf("%d log entries for ten changes made while one was written, want 2", n)
	}
	c.Close()
	c = mustRecover(t, Config{ID: 6, Log: log.MemoryLog, Ender: newRecordingEnder(0)})
	for i, id := range ids {
		if m, err := c.Get(id); err != nil || !slices.Equal(m.Partitions, []string{fmt.Sprint("p", i)}) {
			t.Fatalf("%v after recovery: %+v, %v", id, m, err)
		}
	}
}

// A failed entry fails the changes waiting for the next one too, and the
// coordinator with them: none of them is answered as logged, nor written.
func TestChangesWaitingBehindAFailedEntryFail(t *testing.T) {
	mem := &MemoryLog{}
	log := &heldFail{MemoryLog: mem}
	c := mustRecover(t, Config{ID: 7, Log: log, Ender: newRecordingEnder(0)})
	a, _ := c.New(time.Minute)
	b, _ := c.New(time.Minute)
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { errA <- c.AddPartitions(a, []string{"pa"}) }()
	waitFor(t, "a's entry", func() bool { return mem.Len() == 1 })
	go func() { errB <- c.AddPartitions(b, []string{"pb"}) }()
	waitFor(t, "b to wait for the log", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return mem.Len() > 1 || c.next != nil
	})
	log.fail(errors.New("bookies gone")) // a's entry
	for name, ch := range map[string]chan error{"a": errA, "b": errB} {
		select {
		case err := <-ch:
			if err == nil {
				t.Fatalf("%s's change answered as logged after the entry before it failed", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s's change not answered after the entry failed", name)
		}
	}
	if c.Failed() == nil {
		t.Fatal("coordinator still working after a log entry failed")
	}
	if n := mem.Len(); n != 1 {
		t.Fatalf("%d log entries, want 1: b's record is not written after a failure", n)
	}
}

// waitLanded waits until no entry of c is in flight or waiting (Flush
// writes in the background, and after an entry still in flight).
func waitLanded(t *testing.T, c *Coordinator) {
	t.Helper()
	waitFor(t, "the coordinator's entries to land", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.appending == nil && c.next == nil
	})
}

// newTxns opens n transactions of a minute on c.
func newTxns(t *testing.T, c *Coordinator, n int) []ID {
	t.Helper()
	var ids []ID
	for range n {
		id, err := c.New(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
