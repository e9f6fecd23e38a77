package offload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// A seeded randomized test: random offloads (some with failing sources),
// reads of random ranges, deletes and crashes, against both drivers and a
// model. Each seed is reproducible: go test -run TestRandomized
// -offload.seed=N reruns one, -offload.seeds=N runs N.
var (
	randomSeed  = flag.Int64("offload.seed", 0, "run only this seed of TestRandomized (0: -offload.seeds seeds)")
	randomSeeds = flag.Int("offload.seeds", 4, "seeds of TestRandomized")
	randomSteps = flag.Int("offload.steps", 150, "steps per seed of TestRandomized")
)

func TestRandomized(t *testing.T) {
	seeds := []int64{*randomSeed}
	if *randomSeed == 0 {
		seeds = nil
		for s := 1; s <= *randomSeeds; s++ {
			seeds = append(seeds, int64(s))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runRandomized(t, seed) })
	}
}

// randomWorld is the state of one run: the drivers under test and the
// model of what each key holds.
type randomWorld struct {
	rng   *rand.Rand
	mem   *engine.MemFS
	fs    *fsOffloader
	memo  Offloader
	model map[Key][][]byte
	keys  []Key
	log   []string
}

func runRandomized(t *testing.T, seed int64) {
	w := &randomWorld{rng: rand.New(rand.NewSource(seed)), model: map[Key][][]byte{}}
	w.fs, w.mem = newMemFS(t, Config{BatchEntries: 1 + w.rng.Intn(8), BatchBytes: 1 + w.rng.Intn(20000)})
	w.memo = newMemory(batchLimits{entries: 3, bytes: 1000})
	for i := 0; i < 6; i++ {
		w.keys = append(w.keys, Key{ManagedLedger: fmt.Sprintf("t/ns/persistent/topic-%d", i%2), LedgerID: int64(i / 2), UID: fmt.Sprintf("x%d", i)})
	}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d, steps:\n%v", seed, w.log)
		}
	}()
	for step := 0; step < *randomSteps && !t.Failed(); step++ {
		k := w.keys[w.rng.Intn(len(w.keys))]
		switch p := w.rng.Intn(100); {
		case p < 35:
			w.offload(t, k)
		case p < 80:
			w.read(t, k)
		case p < 95:
			w.delete(t, k)
		default:
			w.crash(t)
		}
	}
}

func (w *randomWorld) offload(t *testing.T, k Key) {
	payloads := randomPayloads(w.rng, w.rng.Intn(30), []int{0, 10, 5000}[w.rng.Intn(3)])
	failAt := int64(-1)
	if len(payloads) > 0 && w.rng.Intn(4) == 0 {
		failAt = w.rng.Int63n(int64(len(payloads)))
	}
	w.log = append(w.log, fmt.Sprintf("offload %v: %d entries, fail at %d", k, len(payloads), failAt))
	_, exists := w.model[k]
	for _, o := range []Offloader{w.fs, w.memo} {
		src := newSource(k.LedgerID, payloads)
		src.failAt = failAt
		err := o.Offload(context.Background(), k, map[string]string{"n": fmt.Sprint(len(payloads))}, src)
		switch {
		case exists && !errors.Is(err, ErrExists):
			t.Fatalf("%s: offload over an existing copy: %v", o.Driver(), err)
		case !exists && failAt >= 0 && !errors.Is(err, errSource):
			t.Fatalf("%s: offload with a failing source: %v", o.Driver(), err)
		case !exists && failAt < 0 && err != nil:
			t.Fatalf("%s: offload: %v", o.Driver(), err)
		}
	}
	if !exists && failAt < 0 {
		w.model[k] = payloads
	}
}

func (w *randomWorld) read(t *testing.T, k Key) {
	payloads, exists := w.model[k]
	first := w.rng.Int63n(int64(len(payloads)) + 2)
	last := first + w.rng.Int63n(5) - 1
	w.log = append(w.log, fmt.Sprintf("read %v %d..%d", k, first, last))
	for _, o := range []Offloader{w.fs, w.memo} {
		r, err := o.Open(context.Background(), k)
		if !exists {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: open of an absent copy: %v", o.Driver(), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: open: %v", o.Driver(), err)
		}
		if m := r.(MetaReader).Meta(); m["n"] != fmt.Sprint(len(payloads)) {
			t.Fatalf("%s: meta %v", o.Driver(), m)
		}
		got, err := r.Read(context.Background(), first, last)
		inRange := first <= last && last < int64(len(payloads))
		if !inRange && !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("%s: read %d..%d of %d entries: %v", o.Driver(), first, last, len(payloads), err)
		}
		if inRange {
			if err == nil {
				err = compareEntries(got, k, first, payloads[first:last+1])
			}
			if err != nil {
				t.Fatalf("%s: %v", o.Driver(), err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *randomWorld) delete(t *testing.T, k Key) {
	w.log = append(w.log, fmt.Sprintf("delete %v", k))
	for _, o := range []Offloader{w.fs, w.memo} {
		if err := o.Delete(context.Background(), k); err != nil {
			t.Fatalf("%s: delete: %v", o.Driver(), err)
		}
	}
	delete(w.model, k)
}

// crash power-fails the filesystem driver's machine: everything Offload
// and Delete returned from must be durable.
func (w *randomWorld) crash(t *testing.T) {
	w.log = append(w.log, "crash")
	w.mem = w.mem.CrashClone(engine.CrashOptions{Rand: w.rng})
	o, err := newFilesystem(Config{FS: w.mem, Root: memRoot, BatchEntries: w.fs.limits.entries, BatchBytes: w.fs.limits.bytes})
	if err != nil {
		t.Fatal(err)
	}
	w.fs = o
}
