package managedledger

// A seeded randomized test of the ledger-backed managed ledger against a
// model (issue 16, "make the class of bug findable"): random adds,
// cursor creates, individual and cumulative acks, cursor deletes, clean
// closes, takeovers by a new factory (a broker restart or ownership
// change: the old instance is left running, or its ledger client killed),
// bookie crashes, rollovers every 1 to 4 entries, trims as soon as
// everything is consumed, injected metadata faults (fail or delay calls
// of the managed ledger's store, faultstore) and ledger faults (the only
// bookie unreachable before or during a batch of adds, slow adds and
// reads). After every step, with faults off, it checks:
//
//   - the stored stream is a suffix of the acknowledged adds, in order,
//     with no gaps: an acknowledged add is never lost (other than by a
//     trim of what every cursor consumed), and a failed add is never
//     visible;
//   - every cursor reads exactly the entries it has not acknowledged, and
//     its backlog counts them: no unacknowledged entry is ever unreadable;
//   - adds in a batch succeed, then fail (never a success after a
//     failure), and after a failure adds fail with ErrAddsStopped until
//     ResumeAdds;
//   - a reopen after a Close that returned nil recovers every cursor
//     exactly; after a takeover a cursor may have lost acknowledgements not
//     yet persisted (redelivery), never gained any.
//
// Each seed is reproducible up to goroutine timing; a failure prints the
// seed and the steps. go test -run TestBKModel -ml.seed=N reruns one seed,
// -ml.seeds=N runs N (make test-long), -ml.steps=N sets their length.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/faultstore"
)

var (
	modelSeeds = flag.Int("ml.seeds", 3, "seeds of TestBKModel (make test-long runs more)")
	modelSeed  = flag.Uint64("ml.seed", 0, "run TestBKModel for this seed only")
	modelSteps = flag.Int("ml.steps", 50, "steps per seed of TestBKModel")
	// On by default (it runs the bookie on entry-log storage). It was off
	// while two crashes in a row lost every entry: the mem engine gave the
	// entry-log index a new empty file system at every start, and the
	// crash let the bookie answer adds after the image was taken.
	modelBookieCrash = flag.Bool("ml.bookiecrash", true, "TestBKModel also crashes and restarts the bookie (entry-log storage)")
)

func TestBKModel(t *testing.T) {
	seeds := make([]uint64, 0, *modelSeeds)
	if *modelSeed != 0 {
		seeds = append(seeds, *modelSeed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range *modelSeeds {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newModelHarness(t, seed)
			for step := 0; step < *modelSteps && !t.Failed(); step++ {
				h.step()
				h.verify()
			}
			h.finish()
			if t.Failed() {
				t.Logf("seed %d (rerun: go test ./managedledger/ -run TestBKModel -ml.seed=%d); steps:\n%s", seed, seed, strings.Join(h.trace, "\n"))
			}
		})
	}
}

// modelEntry is an acknowledged add.
type modelEntry struct {
	pos  Position
	data string
}

// modelCursor is what a durable cursor must hold: acked[i] for entry i.
type modelCursor struct {
	c     Cursor
	acked []bool
}

func (mc *modelCursor) firstUnacked() int {
	i := 0
	for i < len(mc.acked) && mc.acked[i] {
		i++
	}
	return i
}

type modelHarness struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	env  *bkEnv
	ft   *fault.Transport
	// fault is the metadata injector in force (nil: none); the stores of
	// every factory of the harness consult it.
	fault atomic.Pointer[faultstore.Injector]
	cfg   Config
	name  string

	f  *BKFactory
	cl *ledger.Client
	ml ManagedLedger

	entries []modelEntry
	failed  map[string]bool // data of adds that reported failure
	cursors map[string]*modelCursor
	// maybe: cursors whose create or delete failed: they may or may not
	// exist (and trims may have ignored them); adopted if they reappear.
	maybe    map[string]bool
	stopped  bool // an add failed: adds fail until ResumeAdds
	cleanAck bool // the last reopen followed a Close that returned nil
	// trimmable: every entry below it was acknowledged by every cursor at
	// some point (noteTrimmable); only those may be missing from the stream.
	trimmable int
	seq       int
	trace     []string
}

func newModelHarness(t *testing.T, seed uint64) *modelHarness {
	h := &modelHarness{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), env: newBKEnvWith(t, *modelBookieCrash),
		failed: map[string]bool{}, cursors: map[string]*modelCursor{}, maybe: map[string]bool{}}
	h.ft = fault.NewTransport(h.env.tr)
	h.cfg = Config{MaxEntriesPerLedger: int64(1 + h.rng.IntN(4)), MinLedgerRolloverTime: time.Nanosecond, MarkDeleteRate: 100}
	h.name = fmt.Sprintf("public/default/persistent/model-%d", seed)
	h.logf("seed %d: %d entries per ledger", seed, h.cfg.MaxEntriesPerLedger)
	h.open()
	return h
}

func (h *modelHarness) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	h.trace = append(h.trace, fmt.Sprintf("%3d  ", len(h.trace))+line)
}

func (h *modelHarness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Errorf("seed %d: "+format, append([]any{h.seed}, args...)...)
	panic(errModelFailed)
}

var errModelFailed = errors.New("model check failed")

// guard turns fatalf's panic back into a return.
func (h *modelHarness) guard() {
	if r := recover(); r != nil && r != errModelFailed {
		panic(r)
	}
}

func (h *modelHarness) store(s metadata.Store) metadata.Store {
	return faultstore.Wrap(s, faultstore.InjectorFunc(func(op faultstore.Op, p string, i int64) (faultstore.Fault, bool) {
		if inj := h.fault.Load(); inj != nil {
			return (*inj).Inject(op, p, i)
		}
		return faultstore.Fault{}, false
	}))
}

// open opens the managed ledger through a new factory (retrying with
// faults off if a fault failed it) and adopts the cursors it recovered.
func (h *modelHarness) open() {
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		h.f, h.cl = h.env.factoryOver(h.t, h.ft, h.store, h.cfg)
		ml, err := h.f.Open(ctx, h.name)
		if err == nil {
			h.ml = ml
			break
		}
		h.logf("  open failed: %v", err)
		if attempt == 3 {
			h.fatalf("open failed 4 times: %v", err)
		}
		h.fault.Store(nil)
		h.cl.Close()
	}
	h.stopped = false
	recovered := map[string]Cursor{}
	for _, c := range h.ml.Cursors() {
		if c.Durable() {
			recovered[c.Name()] = c
		}
	}
	for name, mc := range h.cursors {
		c, ok := recovered[name]
		if !ok {
			h.fatalf("cursor %s was not recovered", name)
		}
		mc.c = c
		for i, e := range h.entries {
			got := c.IsAcknowledged(e.pos)
			switch {
			case got && !mc.acked[i]:
				h.fatalf("cursor %s recovered with %v (%s) acknowledged: it never was (or it was trimmed)", name, e.pos, e.data)
			case !got && mc.acked[i] && h.cleanAck:
				h.fatalf("cursor %s lost the acknowledgement of %v over a clean close", name, e.pos)
			}
			mc.acked[i] = got
		}
	}
	for name, c := range recovered {
		if h.cursors[name] == nil {
			if !h.maybe[name] {
				h.fatalf("cursor %s recovered: it was never created", name)
			}
			h.adopt(name, c)
		}
	}
	clear(h.maybe)
}

// adopt takes a cursor whose state the model does not know (its create or
// delete failed) as it is.
func (h *modelHarness) adopt(name string, c Cursor) {
	mc := &modelCursor{c: c, acked: make([]bool, len(h.entries))}
	for i, e := range h.entries {
		mc.acked[i] = c.IsAcknowledged(e.pos)
	}
	h.cursors[name] = mc
	h.logf("  adopted cursor %s (first unacked %d)", name, mc.firstUnacked())
}

func (h *modelHarness) step() {
	defer h.guard()
	defer h.fault.Store(nil)
	ctx := context.Background()
	if h.rng.IntN(6) == 0 {
		h.armMetadataFault()
	}
	switch op := h.rng.IntN(22); {
	case op < 6:
		h.add(1+h.rng.IntN(4), "")
	case op == 6:
		h.add(1+h.rng.IntN(3), "down")
	case op == 7:
		h.add(2+h.rng.IntN(4), "down-mid")
	case op == 8:
		slow := slowFaults(h.ft, time.Duration(h.rng.IntN(5))*time.Millisecond, time.Duration(h.rng.IntN(5))*time.Millisecond)
		h.add(1+h.rng.IntN(4), "slow")
		for _, id := range slow {
			h.ft.Remove(id)
		}
	case op == 9:
		h.logf("resume adds")
		h.ml.ResumeAdds()
		h.stopped = false
	case op < 12:
		h.openCursor(fmt.Sprintf("c%d", h.rng.IntN(4)), h.rng.IntN(2) == 0)
	case op < 15:
		if mc, name := h.pickCursor(); mc != nil && len(h.entries) > 0 {
			i := h.rng.IntN(len(h.entries))
			h.logf("cursor %s: ack %d (%v)", name, i, h.entries[i].pos)
			if err := mc.c.Delete(ctx, h.entries[i].pos); err != nil {
				h.fatalf("ack: %v", err)
			}
			mc.acked[i] = true
		}
	case op < 17:
		if mc, name := h.pickCursor(); mc != nil && len(h.entries) > 0 {
			i := h.rng.IntN(len(h.entries))
			h.logf("cursor %s: mark-delete %d (%v)", name, i, h.entries[i].pos)
			if err := mc.c.MarkDelete(ctx, h.entries[i].pos); err != nil {
				h.fatalf("mark-delete: %v", err)
			}
			for k := 0; k <= i; k++ {
				mc.acked[k] = true
			}
		}
	case op == 17:
		if _, name := h.pickCursor(); name != "" {
			h.logf("delete cursor %s", name)
			if err := h.ml.DeleteCursor(ctx, name); err != nil {
				h.logf("  failed: %v", err)
				h.maybe[name] = true
			}
			delete(h.cursors, name)
		}
	case op == 18:
		h.logf("close and reopen")
		err := h.ml.Close(ctx)
		if err != nil {
			h.logf("  close: %v", err)
		}
		h.fault.Store(nil)
		h.cleanAck = err == nil
		h.open()
	case op == 19:
		kill := h.rng.IntN(2) == 0
		h.logf("takeover by a new factory (old client killed: %v)", kill)
		if kill {
			h.cl.Close()
		}
		h.fault.Store(nil)
		h.cleanAck = false
		h.open()
	case op == 20 && *modelBookieCrash:
		h.logf("bookie crash and restart")
		h.env.stopBookie()
		h.env.startBookie()
	default:
		d := time.Duration(10+h.rng.IntN(30)) * time.Millisecond
		h.logf("sleep %v (persist, trim)", d)
		time.Sleep(d)
	}
}

func (h *modelHarness) armMetadataFault() {
	p := 0.1 + h.rng.Float64()*0.4
	var f faultstore.Fault
	if h.rng.IntN(2) == 0 {
		f.Fail = true
	} else {
		f.Delay = time.Duration(1+h.rng.IntN(20)) * time.Millisecond
	}
	h.logf("metadata fault for the next step: %+v with p=%.2f", f, p)
	inj := faultstore.Random(h.rng.Uint64(), p, f)
	h.fault.Store(&inj)
}

// pickCursor picks a cursor the model knows, in name order (reproducible).
func (h *modelHarness) pickCursor() (*modelCursor, string) {
	names := make([]string, 0, len(h.cursors))
	for n := range h.cursors {
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, ""
	}
	slices.Sort(names)
	n := names[h.rng.IntN(len(names))]
	return h.cursors[n], n
}

// add adds k entries at once; mode "down" makes the bookie unreachable
// first, "down-mid" after half of them were handed over.
func (h *modelHarness) add(k int, mode string) {
	h.logf("add %d (%s), stopped=%v", k, mode, h.stopped)
	down := 0 // the injected fault making the bookie unreachable (0: none)
	if mode == "down" {
		down = h.ft.Inject(unreachable)
	}
	defer func() { h.ft.Remove(down) }()
	chs := make([]<-chan addResult, k)
	datas := make([]string, k)
	for i := range k {
		datas[i] = fmt.Sprintf("e%d", h.seq)
		h.seq++
		chs[i] = addAsync(h.ml, datas[i])
		if mode == "down-mid" && i == k/2-1 {
			down = h.ft.Inject(unreachable)
		}
	}
	failed := false
	for i, ch := range chs {
		var r addResult
		select {
		case r = <-ch:
		case <-time.After(30 * time.Second):
			h.fatalf("add %s: no callback", datas[i])
		}
		switch {
		case r.err == nil && (failed || h.stopped):
			h.fatalf("add %s stored at %v after an earlier add failed", datas[i], r.p)
		case r.err == nil:
			if n := len(h.entries); n > 0 && r.p.Compare(h.entries[n-1].pos) <= 0 {
				h.fatalf("add %s at %v, not after the previous %v", datas[i], r.p, h.entries[n-1].pos)
			}
			h.entries = append(h.entries, modelEntry{r.p, datas[i]})
			for _, mc := range h.cursors {
				mc.acked = append(mc.acked, false)
			}
			h.logf("  %s at %v", datas[i], r.p)
		default:
			if h.stopped && !errors.Is(r.err, ErrAddsStopped) {
				h.fatalf("add %s while stopped: %v, want ErrAddsStopped", datas[i], r.err)
			}
			h.logf("  %s failed: %v", datas[i], r.err)
			h.failed[datas[i]] = true
			failed = true
		}
	}
	if failed {
		h.stopped = true
	}
}

func (h *modelHarness) openCursor(name string, earliest bool) {
	if h.cursors[name] != nil {
		return
	}
	h.logf("open cursor %s (earliest %v)", name, earliest)
	init := Latest
	if earliest {
		init = Earliest
	}
	before := h.firstStored()
	c, err := h.ml.OpenCursor(context.Background(), name, CursorOptions{Initial: init})
	if err != nil {
		h.logf("  failed: %v", err)
		h.maybe[name] = true
		return
	}
	if h.maybe[name] {
		// Its earlier create or delete failed: a node may have been left,
		// and an open takes it over as stored (its state is unknown here).
		delete(h.maybe, name)
		h.adopt(name, c)
		return
	}
	first := len(h.entries) // Latest: only what comes next
	if earliest {
		// The first entry stored, when the cursor was created: a trim
		// may have run during the create (by the other cursors).
		first = max(before, h.firstStored())
	}
	mc := &modelCursor{c: c, acked: make([]bool, len(h.entries))}
	for i := range first {
		mc.acked[i] = true
	}
	delete(h.maybe, name)
	h.cursors[name] = mc
}

// stored reads the whole stream with a reader.
func (h *modelHarness) stored() []Entry {
	r, err := h.ml.NewNonDurableCursor(Position{-1, -1})
	if err != nil {
		h.fatalf("reader: %v", err)
	}
	defer r.Close(context.Background())
	var out []Entry
	for {
		es, err := r.ReadEntries(context.Background(), 50, 1<<20)
		if err != nil {
			h.fatalf("reader: %v", err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
	}
}

// firstStored is the index in entries of the first stored entry.
func (h *modelHarness) firstStored() int { return len(h.entries) - len(h.stored()) }

// noteTrimmable raises the index below which every cursor had
// acknowledged every entry, or below which everything was when there was
// no cursor (entries there may be trimmed at any time).
// verify runs after every step, so no state a trim could have used is
// missed.
func (h *modelHarness) noteTrimmable() {
	// With no cursor every closed ledger may go (as in Pulsar: a topic
	// without subscriptions keeps only what retention asks for).
	low := len(h.entries)
	for _, mc := range h.cursors {
		low = min(low, mc.firstUnacked())
	}
	h.trimmable = max(h.trimmable, low)
}

// checkStream checks what a reader from the start read: acknowledged adds
// at their positions, in order. An acknowledged add missing from it must
// be trimmable: the missing ones need not be a prefix, since a reader
// racing the background trim can read a ledger being trimmed and then
// skip to the first ledger kept. It returns the index of the first entry
// read (len(h.entries) if none).
func (h *modelHarness) checkStream(got []Entry) int {
	first, next := len(h.entries), 0
	missing := func(i int) {
		if i >= h.trimmable {
			h.fatalf("acknowledged add %s at %v is not stored, and not every cursor acknowledged it (trimmable below %d); stream %v",
				h.entries[i].data, h.entries[i].pos, h.trimmable, entryNames(got))
		}
	}
	for k, e := range got {
		for next < len(h.entries) && h.entries[next].pos != e.Position {
			missing(next)
			next++
		}
		if next == len(h.entries) || string(e.Data) != h.entries[next].data {
			if h.failed[string(e.Data)] {
				h.fatalf("a failed add is stored: %s at %v", e.Data, e.Position)
			}
			h.fatalf("%s at %v read, which no acknowledged add put there (or out of order); stream %v", e.Data, e.Position, entryNames(got))
		}
		if k == 0 {
			first = next
		}
		next++
	}
	for ; next < len(h.entries); next++ {
		missing(next)
	}
	return first
}

func (h *modelHarness) verify() {
	defer h.guard()
	h.fault.Store(nil)
	ctx := context.Background()
	got := h.stored()
	h.takeVisibleFailedAdds(got)
	if len(got) > len(h.entries) {
		h.fatalf("%d entries stored, only %d adds acknowledged: %v", len(got), len(h.entries), entryNames(got))
	}
	h.noteTrimmable()
	s := h.checkStream(got)
	if n := len(h.entries); len(got) > 0 && h.ml.LastConfirmed() != h.entries[n-1].pos {
		h.fatalf("last confirmed %v, last acknowledged add at %v", h.ml.LastConfirmed(), h.entries[n-1].pos)
	}
	for name, mc := range h.cursors {
		if f := mc.firstUnacked(); f < s {
			h.fatalf("entry %d (%v, %s) is not stored: cursor %s never acknowledged it (stream starts at %d)", f, h.entries[f].pos, h.entries[f].data, name, s)
		}
		var want []string
		for i, e := range h.entries {
			if !mc.acked[i] {
				want = append(want, e.data)
			}
		}
		mc.c.Rewind()
		var read []string
		for {
			es, err := mc.c.ReadEntries(ctx, 1+h.rng.IntN(5), 1<<20)
			if err != nil {
				h.fatalf("cursor %s: read: %v", name, err)
			}
			if len(es) == 0 {
				break
			}
			read = append(read, entryNames(es)...)
		}
		if fmt.Sprint(read) != fmt.Sprint(want) {
			h.fatalf("cursor %s reads %v, want its unacknowledged entries %v", name, read, want)
		}
		if b := mc.c.Backlog(); b != int64(len(want)) {
			h.fatalf("cursor %s: backlog %d, %d entries unacknowledged", name, b, len(want))
		}
	}
}

// takeVisibleFailedAdds makes the failed adds found stored entries of
// the model. A failed add's outcome is unknown, as in BookKeeper: its
// entry may have reached the bookie before the write failed (a later
// entry failed first, and the writer failed every pending add), and the
// recovery of the failed ledger (by a later rollover or the next owner)
// then keeps it. It must be in its place (after every add before it,
// before every add after it); cursors take it as they find it.
func (h *modelHarness) takeVisibleFailedAdds(got []Entry) {
	for _, e := range got {
		data := string(e.Data)
		if !h.failed[data] {
			continue
		}
		delete(h.failed, data)
		seq := addSeq(data)
		j, _ := slices.BinarySearchFunc(h.entries, seq, func(me modelEntry, seq int) int { return addSeq(me.data) - seq })
		if (j > 0 && h.entries[j-1].pos.Compare(e.Position) >= 0) || (j < len(h.entries) && h.entries[j].pos.Compare(e.Position) <= 0) {
			h.fatalf("failed add %s is stored at %v, out of its place in the stream %v", data, e.Position, h.entries)
		}
		h.entries = slices.Insert(h.entries, j, modelEntry{e.Position, data})
		for _, mc := range h.cursors {
			mc.acked = slices.Insert(mc.acked, j, mc.c.IsAcknowledged(e.Position))
		}
		h.logf("  failed add %s is stored at %v (its write reached the bookie)", data, e.Position)
	}
}

func addSeq(data string) int {
	var n int
	fmt.Sscanf(data, "e%d", &n)
	return n
}

func (h *modelHarness) finish() {
	defer h.guard()
	h.fault.Store(nil)
	if err := h.ml.Close(context.Background()); err != nil {
		h.logf("final close: %v", err)
	}
}

func entryNames(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Data)
	}
	return out
}
