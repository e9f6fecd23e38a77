package journal

import (
	"bytes"
	"fmt"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// crashSeeds is how many seeds TestCrashReplay runs; MAGNETAR_CRASH_SEEDS
// raises it for soak runs (make soak).
func crashSeeds(t *testing.T) int {
	if s := os.Getenv("MAGNETAR_CRASH_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("MAGNETAR_CRASH_SEEDS=%q: %v", s, err)
		}
		return n
	}
	if testing.Short() {
		return 100 // the fast inner loop (make test-short)
	}
	return 300 // make test; make test-long runs 3000
}

// TestCrashReplay crashes a busy journal at a random moment (optionally
// tearing unsynced writes), replays the crash image, and checks: every
// acknowledged entry after the surviving checkpoint is there with its
// bytes; nothing replayed was never added; each ledger's entries come back
// in order without holes.
func TestCrashReplay(t *testing.T) {
	base := uint64(0)
	if s := os.Getenv("MAGNETAR_SEED"); s != "" {
		v, _ := strconv.ParseUint(s, 10, 64)
		base = v
	}
	for i := 0; i < crashSeeds(t); i++ {
		seed := base + uint64(i)
		if err := crashOnce(seed); err != nil {
			t.Fatalf("seed %d (rerun with MAGNETAR_SEED=%d and MAGNETAR_CRASH_SEEDS=1): %v", seed, seed, err)
		}
	}
}

type crashRun struct {
	rng      *rand.Rand
	fs       *engine.MemFS
	j        *Journal
	mu       sync.Mutex
	acked    map[[2]int64]Mark
	ackCount int
	target   int
	tear     *mrand.Rand // math/rand, as engine.CrashOptions wants
	image    *engine.MemFS
	snapshot map[[2]int64]Mark
}

func crashOnce(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x6a6f75726e616c))
	opts := Options{MaxFileSize: int64(8+rng.IntN(64)) << 10, PreallocSize: 16 << 10,
		Pipeline: rng.IntN(2) == 0, NoFileReuse: rng.IntN(2) == 0, MaxRecycledFiles: 1 + rng.IntN(2),
		ZeroFill: rng.IntN(2) == 0, ZeroFillRate: 1 << 30}
	if rng.IntN(2) == 0 {
		// Small groups fill up, so adds queue behind full groups and one
		// write + datasync carries several: a crash tears them together.
		opts.BufferedWritesThreshold = int(4+rng.IntN(12)) << 10
	}
	r := &crashRun{rng: rng, fs: engine.NewMem(), acked: map[[2]int64]Mark{}}
	j, err := Open(r.fs, "/journal", opts, func(Entry) error { return nil })
	if err != nil {
		return err
	}
	r.j = j
	const writers, perWriter = 4, 40
	r.target = rng.IntN(writers*perWriter + 1)
	if rng.IntN(2) == 0 {
		r.tear = mrand.New(mrand.NewSource(int64(seed)))
	}
	r.runWriters(writers, perWriter, seed)
	image := r.crashImage()
	j.Close()
	if err := r.verify(image, opts); err != nil {
		return err
	}
	// Replaying the image a second time (after the first replay truncated
	// its tail) must give the same answer.
	return r.verify(image, opts)
}

// runWriters adds from several goroutines, each keeping a random number of
// adds in flight, and checkpoints now and then.
func (r *crashRun) runWriters(writers, perWriter int, seed uint64) {
	var wg sync.WaitGroup
	for w := 1; w <= writers; w++ {
		wg.Add(1)
		go func(ledger int64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(ledger)))
			window := make(chan struct{}, 1+rng.IntN(16))
			for e := int64(0); e < int64(perWriter); e++ {
				window <- struct{}{}
				err := r.j.Add(ledger, e, payloadFor(ledger, e, sizeFor(ledger, e, 3000)), func(m Mark, err error) {
					if err == nil {
						r.ack(ledger, e, m)
					}
					<-window
				})
				if err != nil {
					return
				}
				if rng.IntN(20) == 0 {
					_ = r.j.Checkpoint(r.j.LastMark())
				}
			}
		}(int64(w))
	}
	wg.Wait()
}

func (r *crashRun) ack(ledger, entry int64, m Mark) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked[[2]int64{ledger, entry}] = m
	r.ackCount++
	if r.ackCount == r.target && r.image == nil {
		r.takeImageLocked()
	}
}

// takeImageLocked records what was acknowledged, then crashes: everything
// in the snapshot was durable before the image was taken. Adds keep going
// on the original file system.
func (r *crashRun) takeImageLocked() {
	r.snapshot = make(map[[2]int64]Mark, len(r.acked))
	for k, v := range r.acked {
		r.snapshot[k] = v
	}
	r.image = r.fs.CrashClone(engine.CrashOptions{Rand: r.tear})
}

// crashImage returns the image taken at the target ack, or crashes now
// when the target was 0 or never reached.
func (r *crashRun) crashImage() *engine.MemFS {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.image == nil {
		r.takeImageLocked()
	}
	return r.image
}

// verify replays image and checks it against the acknowledged snapshot.
func (r *crashRun) verify(image *engine.MemFS, opts Options) error {
	cp := Mark{}
	if b, err := engine.ReadFile(image, "/journal/"+checkpointFile); err == nil {
		if cp, err = decodeMark(b, checkpointFile); err != nil {
			return err
		}
	}
	var got []Entry
	j, err := Open(image, "/journal", opts, func(e Entry) error {
		e.Payload = bytes.Clone(e.Payload)
		got = append(got, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer j.Close()
	seen := map[[2]int64]bool{}
	last := map[int64]int64{}
	for _, e := range got {
		k := [2]int64{e.LedgerID, e.EntryID}
		if !bytes.Equal(e.Payload, payloadFor(e.LedgerID, e.EntryID, sizeFor(e.LedgerID, e.EntryID, 3000))) {
			return fmt.Errorf("ledger %d entry %d: replayed bytes were never added", e.LedgerID, e.EntryID)
		}
		if prev, ok := last[e.LedgerID]; ok && e.EntryID != prev+1 {
			return fmt.Errorf("ledger %d: entry %d replayed after %d (hole or reorder)", e.LedgerID, e.EntryID, prev)
		}
		last[e.LedgerID], seen[k] = e.EntryID, true
	}
	for k, m := range r.snapshot {
		if cp.Before(m) && !seen[k] {
			names, _ := image.List("/journal")
			var files []string
			for _, n := range names {
				st, _ := image.Stat("/journal/" + n)
				files = append(files, fmt.Sprintf("%s:%d", n, st.Size))
			}
			var ents []string
			for _, e := range got {
				ents = append(ents, fmt.Sprintf("%d/%d", e.LedgerID, e.EntryID))
			}
			return fmt.Errorf("ledger %d entry %d acknowledged at %v (checkpoint %v) but not replayed; files %v; replayed %v",
				k[0], k[1], m, cp, files, ents)
		}
	}
	return nil
}
