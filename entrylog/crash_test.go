package entrylog

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// crashSeeds is how many seeds TestCrash runs; MAGNETAR_CRASH_SEEDS raises
// it for soak runs.
func crashSeeds(t *testing.T) int {
	if s := os.Getenv("MAGNETAR_CRASH_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("MAGNETAR_CRASH_SEEDS=%q: %v", s, err)
		}
		return n
	}
	if testing.Short() {
		return 40
	}
	return 100 // make test; make test-long runs 3000
}

// TestCrash runs a random sequence of adds, state changes, flushes,
// deletions and compactions, and crashes both file systems at one random
// point: between operations or at any durability boundary inside a flush,
// a deletion, a compaction or a checkpoint, sometimes tearing unsynced
// writes. On the crash image it checks that everything a completed
// checkpoint covers is there with its bytes, that no index entry points at
// garbage or belongs to a deleted ledger; then it replays the journal from
// the checkpoint and requires exactly the model, again after a compaction,
// a clean restart, and a second crash after the flush that follows replay.
func TestCrash(t *testing.T) {
	base := uint64(0)
	if s := os.Getenv("MAGNETAR_SEED"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
	}
	points := map[string]int{} // where runs crashed, to see that all kinds of point are reached
	for i := 0; i < crashSeeds(t); i++ {
		seed := base + uint64(i)
		at, err := crashOnce(seed)
		if err != nil {
			t.Fatalf("seed %d (rerun with MAGNETAR_SEED=%d MAGNETAR_CRASH_SEEDS=1): %v", seed, seed, err)
		}
		points[strings.TrimRightFunc(at, unicode.IsDigit)]++
	}
	t.Logf("crash points: %v", points)
}

// crashOps is how many operations a run does.
const crashOps = 150

// crashRun is one seed's run. The driver is one goroutine and background
// flushes are off (the write cache is never half full), so the run, and
// the point of the crash, depend on the seed alone.
type crashRun struct {
	rng   *rand.Rand
	disks *crashDisks
	db    *DB
	opts  Options
	dirs  []string

	mu        sync.Mutex
	ops       []op // acknowledged
	completed int  // journal position of the last completed checkpoint
	inflight  *op  // a deletion in progress
	hits      int
	target    int // crash at this hook hit, or
	targetOp  int // after this operation
	tearSeed  int64
	image     *crashImage
}

type crashImage struct {
	disks     *crashDisks
	acked     int
	completed int
	inflight  *op
	at        string
}

// crashOnce runs one seed and returns where it crashed.
func crashOnce(seed uint64) (string, error) {
	r := &crashRun{rng: rand.New(rand.NewPCG(seed, 0x656e7472796c6f67)), disks: newCrashDisks()}
	// A quarter of the runs crash between operations, the rest at one of
	// the (about 90 or more) durability boundaries a run passes.
	r.target, r.targetOp = 1+r.rng.IntN(90), -1
	if r.rng.IntN(4) == 0 {
		r.target, r.targetOp = -1, r.rng.IntN(crashOps)
	}
	r.tearSeed = -1
	if r.rng.IntN(2) == 0 {
		r.tearSeed = int64(seed)
	}
	r.dirs = []string{"/d0"}
	if r.rng.IntN(2) == 0 {
		r.dirs = append(r.dirs, "/d1")
	}
	r.opts = Options{
		LogSizeLimit:       int64(12+r.rng.IntN(32)) << 10,
		WriteCacheMaxSize:  8 << 20,
		ReadCacheMaxSize:   int64(r.rng.IntN(2)) * 64 << 10,
		ReadAheadBatchSize: 1 + r.rng.IntN(8),
		FlushInterval:      -1,
		GCWaitTime:         -1,
		IndexMemTableSize:  256 << 10,
		IndexCacheSize:     1 << 20,
		Checkpointer:       r,
		Logger:             testLogger(),
		hook:               r.hook,
		sequential:         true,
	}
	// Half the runs commit a flush's index in batches of one to four
	// entries, so crashes fall between the batches of one flush too.
	if r.rng.IntN(2) == 0 {
		r.opts.commitChunk = 1 + r.rng.IntN(4)
	}
	// A third of the runs write through the page cache, the rest direct
	// (block-padded flushes): both layouts must survive every crash point.
	r.opts.BufferedWrites = r.rng.IntN(3) == 0
	db, err := r.open(r.disks)
	if err != nil {
		return "", err
	}
	r.db = db
	for i := 0; i < crashOps; i++ {
		if err := r.step(); err != nil {
			db.Close()
			return "", fmt.Errorf("op %d: %w", i, err)
		}
		r.betweenOps(i)
	}
	r.mu.Lock()
	if r.image == nil {
		r.takeImageLocked("end")
	}
	img := r.image
	r.mu.Unlock()
	if err := db.Close(); err != nil {
		return img.at, fmt.Errorf("close: %w", err)
	}
	if err := r.verify(img); err != nil {
		return img.at, fmt.Errorf("crash at %s (%d acknowledged ops, checkpoint %d): %w", img.at, img.acked, img.completed, err)
	}
	return img.at, nil
}

func (r *crashRun) open(d *crashDisks) (*DB, error) {
	o := r.opts
	o.IndexFS = d.indexFS()
	return Open(d.engineFS(), r.dirs, o)
}

// StartCheckpoint implements Checkpointer: the journal position is the
// number of acknowledged operations.
func (r *crashRun) StartCheckpoint() Checkpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// CompleteCheckpoint implements Checkpointer.
func (r *crashRun) CompleteCheckpoint(cp Checkpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.completed = max(r.completed, cp.(int))
	return nil
}

// hook counts the durability boundaries passed and crashes at the
// target one.
func (r *crashRun) hook(point string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits++
	if r.hits == r.target && r.image == nil {
		r.takeImageLocked(point)
	}
}

// betweenOps crashes after op i if that is the target.
func (r *crashRun) betweenOps(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i == r.targetOp && r.image == nil {
		r.takeImageLocked(fmt.Sprintf("after op %d", i))
	}
}

func (r *crashRun) takeImageLocked(at string) {
	r.image = &crashImage{disks: r.disks.image(r.tearSeed), acked: len(r.ops), completed: r.completed,
		inflight: r.inflight, at: at}
}

func (r *crashRun) ack(o op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

// step runs one random operation and acknowledges it if it succeeded.
func (r *crashRun) step() error {
	l := int64(1 + r.rng.IntN(10))
	switch x := r.rng.IntN(100); {
	case x < 50:
		e := int64(r.rng.IntN(40))
		data := randomBytes(r.rng, r.rng.IntN(1500))
		return r.do(op{kind: opAdd, ledger: l, entry: e, data: data}, r.db.AddEntry(l, e, data))
	case x < 56:
		key := randomBytes(r.rng, r.rng.IntN(20))
		return r.do(op{kind: opKey, ledger: l, data: key}, r.db.SetMasterKey(l, key))
	case x < 61:
		_, err := r.db.SetFenced(l)
		return r.do(op{kind: opFence, ledger: l}, err)
	case x < 66:
		lac := randomBytes(r.rng, r.rng.IntN(30))
		return r.do(op{kind: opLAC, ledger: l, data: lac}, r.db.SetExplicitLAC(l, lac))
	case x < 76:
		return r.db.Flush()
	case x < 82:
		o := op{kind: opDelete, ledger: l}
		r.mu.Lock()
		r.inflight = &o
		r.mu.Unlock()
		err := r.db.DeleteLedger(l)
		r.mu.Lock()
		r.inflight = nil
		r.mu.Unlock()
		return r.do(o, err)
	case x < 90:
		return r.db.Compact(context.Background(), []float64{0, 0.3, 1}[r.rng.IntN(3)])
	default:
		return r.checkRead(l, int64(r.rng.IntN(40)))
	}
}

// do acknowledges o if err is nil; ErrNoLedger (fencing or setting the LAC
// of a ledger that does not exist) is an expected refusal.
func (r *crashRun) do(o op, err error) error {
	if err == nil {
		r.ack(o)
		return nil
	}
	if isNoLedger(err) && (o.kind == opFence || o.kind == opLAC) {
		return nil
	}
	return fmt.Errorf("%v: %w", o, err)
}

// checkRead compares a live read with the model of what was acknowledged.
func (r *crashRun) checkRead(l, e int64) error {
	r.mu.Lock()
	m := newModel(r.ops)
	r.mu.Unlock()
	got, err := r.db.ReadEntry(l, e)
	lm := m.ledgers[l]
	switch {
	case lm == nil:
		if !isNoLedger(err) {
			return fmt.Errorf("read %d/%d of a ledger the model lacks: %v", l, e, err)
		}
	case lm.entries[e] == nil:
		if !isNoEntry(err) {
			return fmt.Errorf("read %d/%d never added: %v", l, e, err)
		}
	case err != nil || string(got) != string(lm.entries[e]):
		return fmt.Errorf("read %d/%d: %d bytes, %v; want %d bytes", l, e, len(got), err, len(lm.entries[e]))
	}
	return nil
}

// verify opens the crash image and checks it (see TestCrash).
func (r *crashRun) verify(img *crashImage) error {
	r.opts.hook = nil
	// Pebble records a stack per sstable iterator in race builds: a read
	// cache that holds everything keeps verification affordable, while
	// every first read still goes to the entry log.
	r.opts.ReadCacheMaxSize, r.opts.ReadAheadBatchSize = 16<<20, 100
	ops := r.ops[:img.acked]
	db, err := r.open(img.disks)
	if err != nil {
		return fmt.Errorf("open after crash: %w", err)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	m := newModel(ops)
	deletedOrInflight := maps.Clone(m.deleted)
	if img.inflight != nil {
		deletedOrInflight[img.inflight.ledger] = true
		l := img.inflight.ledger
		if _, dead, err := db.shardFor(l).ix.get(ledgerKey(prefixTombstone, l)); err != nil {
			return err
		} else if dead {
			m.apply(*img.inflight) // the deletion committed before the crash
		}
	}
	if err := checkDurable(db, ops, img.completed, deletedOrInflight); err != nil {
		return fmt.Errorf("before replay: %w", err)
	}
	if err := checkIndex(db, ops); err != nil {
		return fmt.Errorf("before replay: %w", err)
	}
	if err := replay(db, ops[img.completed:]); err != nil {
		return err
	}
	if err := checkModel(db, m); err != nil {
		return fmt.Errorf("after replay: %w", err)
	}
	if err := db.Compact(context.Background(), 1); err != nil {
		return fmt.Errorf("compact after replay: %w", err)
	}
	if err := checkModel(db, m); err != nil {
		return fmt.Errorf("after compaction: %w", err)
	}
	// What the bookie does next: a flush whose checkpoint covers the
	// replayed records, after which the journal no longer has them. A
	// second crash then must keep everything.
	if err := db.Flush(); err != nil {
		return fmt.Errorf("flush after replay: %w", err)
	}
	second := img.disks.image(r.tearSeed)
	err, db = db.Close(), nil
	if err != nil {
		return fmt.Errorf("close after replay: %w", err)
	}
	if db, err = r.open(img.disks); err != nil {
		return fmt.Errorf("reopen after replay: %w", err)
	}
	if err := checkModel(db, m); err != nil {
		return fmt.Errorf("after a clean restart: %w", err)
	}
	if err := checkIndex(db, ops); err != nil {
		return err
	}
	err, db = db.Close(), nil
	if err != nil {
		return fmt.Errorf("close after the clean restart: %w", err)
	}
	if db, err = r.open(second); err != nil {
		return fmt.Errorf("open after a second crash: %w", err)
	}
	if err := checkModel(db, m); err != nil {
		return fmt.Errorf("after a second crash (replayed and checkpointed before it): %w", err)
	}
	return checkIndex(db, ops)
}
