package entrylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// versioned is entry (l, e)'s content in its version v.
func versioned(l, e int64, v int) []byte {
	rng := rand.New(rand.NewPCG(uint64(l)<<32|uint64(e), uint64(v)))
	return randomBytes(rng, 100+rng.IntN(1400))
}

// liveModel is what concurrent writers have published: every version ever
// added per entry (a reader racing a replacement may see either), the
// latest one, and which ledgers are being or were deleted.
type liveModel struct {
	mu       sync.Mutex
	versions map[entryKeyID][]int
	deleting map[int64]bool
	keys     []entryKeyID
}

func (m *liveModel) publish(k entryKeyID, v int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.versions[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.versions[k] = append(m.versions[k], v)
}

func (m *liveModel) markDeleting(l int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleting[l] = true
}

func (m *liveModel) pick(rng *rand.Rand) (entryKeyID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.keys) == 0 {
		return entryKeyID{}, false
	}
	return m.keys[rng.IntN(len(m.keys))], true
}

// check judges a read of a published entry.
func (m *liveModel) check(k entryKeyID, got []byte, err error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrNoLedger) && m.deleting[k.ledgerID] {
			return nil
		}
		return fmt.Errorf("read %d/%d: %w", k.ledgerID, k.entryID, err)
	}
	for _, v := range m.versions[k] {
		if bytes.Equal(got, versioned(k.ledgerID, k.entryID, v)) {
			return nil
		}
	}
	return fmt.Errorf("read %d/%d: %d bytes that were never added", k.ledgerID, k.entryID, len(got))
}

// ops returns the final model as operations (latest versions, deletions).
func (m *liveModel) ops() []op {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []op
	for _, k := range m.keys {
		vs := m.versions[k]
		for _, v := range vs {
			out = append(out, op{kind: opAdd, ledger: k.ledgerID, entry: k.entryID, data: versioned(k.ledgerID, k.entryID, v)})
		}
	}
	for l := range m.deleting {
		out = append(out, op{kind: opDelete, ledger: l})
	}
	return out
}

// TestGCConcurrent runs writers (adding, replacing, deleting their
// ledgers), readers and a compactor at once on small logs and caches, so
// flushes, rotations, compactions and log removals race with reads and
// deletions. No read may return bytes never added, an error other than
// ErrNoLedger of a ledger being deleted, or corruption; in the end the
// storage holds exactly the latest versions, before and after a restart,
// and no index entry is left pointing at a removed log or a deleted ledger.
func TestGCConcurrent(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { gcConcurrentOnce(t, seed) })
	}
}

func gcConcurrentOnce(t *testing.T, seed uint64) {
	efs, ifs := engine.NewMem(), vfs.NewMem()
	opts := Options{LogSizeLimit: 24 << 10, WriteCacheMaxSize: 2 * 48 << 10, ReadCacheMaxSize: 2 * 32 << 10,
		ReadAheadBatchSize: 8, FlushInterval: 5 * time.Millisecond, GCWaitTime: -1, IndexFS: ifs,
		IndexMemTableSize: 512 << 10, Logger: testLogger()}
	db, err := Open(efs, []string{"/d0", "/d1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	m := &liveModel{versions: map[entryKeyID][]int{}, deleting: map[int64]bool{}}
	var writers, others sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			if err := gcWriter(db, m, seed, w); err != nil {
				errs <- fmt.Errorf("writer %d: %w", w, err)
			}
		}()
	}
	for r := 0; r < 2; r++ {
		others.Add(1)
		go func() {
			defer others.Done()
			if err := gcReader(db, m, rand.New(rand.NewPCG(seed, uint64(100+r))), stop); err != nil {
				errs <- fmt.Errorf("reader %d: %w", r, err)
			}
		}()
	}
	var compactions atomic.Int64
	others.Add(1)
	go func() {
		defer others.Done()
		rng := rand.New(rand.NewPCG(seed, 200))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Compact(context.Background(), []float64{0, 0.5, 1}[rng.IntN(3)]); err != nil {
				errs <- fmt.Errorf("compactor: %w", err)
				return
			}
			compactions.Add(1)
		}
	}()
	writers.Wait()
	close(stop)
	others.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := db.Stats()
	t.Logf("compaction passes %d; stats %+v", compactions.Load(), st)
	if st.Compactions == 0 || st.EntryLogsRemoved == 0 || st.CompactedBytes == 0 {
		t.Fatalf("the run compacted nothing: %+v", st)
	}
	gcFinalCheck(t, db, m, efs, ifs, opts)
}

// gcWriter keeps four ledgers of its own (ids w*1000+...): it adds
// entries, replaces some, and later deletes ledgers (trying to add to them
// again, which must be ignored) and starts new ones.
func gcWriter(db *DB, m *liveModel, seed uint64, w int) error {
	rng := rand.New(rand.NewPCG(seed, uint64(w)))
	ledgers := []int64{int64(w * 1000), int64(w*1000 + 1), int64(w*1000 + 2), int64(w*1000 + 3)}
	nextLedger := int64(w*1000 + 4)
	next := map[int64]int64{}
	version := map[entryKeyID]int{}
	for step := 0; step < 600; step++ {
		i := rng.IntN(len(ledgers))
		l := ledgers[i]
		switch x := rng.IntN(100); {
		case x < 85 || next[l] == 0:
			k := entryKeyID{l, next[l]}
			next[l]++
			if err := db.AddEntry(l, k.entryID, versioned(l, k.entryID, 0)); err != nil {
				return err
			}
			m.publish(k, 0)
		case x < 98 || step < 200:
			k := entryKeyID{l, int64(rng.IntN(int(next[l])))}
			version[k]++
			m.publish(k, version[k]) // before the add: a reader may see it as soon as it is in
			if err := db.AddEntry(l, k.entryID, versioned(l, k.entryID, version[k])); err != nil {
				return err
			}
		default:
			m.markDeleting(l)
			if err := db.DeleteLedger(l); err != nil {
				return err
			}
			if err := db.AddEntry(l, next[l], versioned(l, next[l], 0)); err != nil {
				return fmt.Errorf("add to deleted ledger %d: %w", l, err)
			}
			if ok, _ := db.LedgerExists(l); ok {
				return fmt.Errorf("deleted ledger %d came back after an add", l)
			}
			ledgers[i], nextLedger = nextLedger, nextLedger+1
		}
	}
	return nil
}

func gcReader(db *DB, m *liveModel, rng *rand.Rand, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		k, ok := m.pick(rng)
		if !ok {
			continue
		}
		got, err := db.ReadEntry(k.ledgerID, k.entryID)
		if err := m.check(k, got, err); err != nil {
			return err
		}
	}
}

// gcFinalCheck compares the storage with the final model, compacts
// everything, restarts, and compares again.
func gcFinalCheck(t *testing.T, db *DB, m *liveModel, efs engine.FS, ifs vfs.FS, opts Options) {
	ops := m.ops()
	final := newModel(ops)
	check := func(when string) {
		t.Helper()
		if err := checkModel(db, final); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if err := checkIndex(db, ops); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	check("after the run")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	check("after a full compaction")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(efs, []string{"/d0", "/d1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check("after a restart")
}
