package journal

import (
	"errors"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
)

// Adds that queue behind a full group while a datasync runs are written
// as several groups in one write and made durable by one datasync: one
// group per datasync capped the journal at journalBufferedWritesThreshold
// per datasync (about 110 MiB/s at the durable maximum on this disk).
//
// The writer is held on the first add while the others queue: in its
// datasync for a serial journal, in its write for a pipelined one (whose
// writer goes on writing while a datasync runs, so holding the datasync
// let the writer race the adds, and the number of groups it wrote before
// the datasync returned depended on the machine's load).
func TestBackloggedGroupsShareOneDatasync(t *testing.T) {
	for name, c := range map[string]struct {
		opts Options
		hold errorfs.Op
	}{"serial": {Options{}, errorfs.OpSync}, "pipeline": {Options{Pipeline: true}, errorfs.OpWrite}} {
		t.Run(name, func(t *testing.T) {
			opts := c.opts
			var syncs, held atomic.Int64
			var gating atomic.Bool
			first, gate := make(chan struct{}), make(chan struct{})
			fs := errorfs.Wrap(engine.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op, path string, _ int64) (errorfs.Fault, bool) {
				if !strings.HasSuffix(path, ".journal") || !gating.Load() {
					return errorfs.Fault{}, false
				}
				if op == errorfs.OpSync {
					syncs.Add(1)
				}
				if op == c.hold && held.Add(1) == 1 {
					close(first)
					<-gate // the writer waits on the first add while the others queue
				}
				return errorfs.Fault{}, false
			}))
			opts.BufferedWritesThreshold = 16 << 10
			j, _ := openT(t, fs, opts)
			gating.Store(true)
			const n = 64 // 1.5 KiB on average: 6 groups' worth at a 16 KiB threshold
			var wg sync.WaitGroup
			wg.Add(n + 1)
			add := func(e int64) {
				if err := j.Add(1, e, payloadFor(1, e, sizeFor(1, e, 3000)), func(_ Mark, err error) {
					if err != nil {
						t.Errorf("add %d: %v", e, err)
					}
					wg.Done()
				}); err != nil {
					t.Fatal(err)
				}
			}
			add(0)
			<-first
			for e := int64(1); e <= n; e++ {
				add(e)
			}
			close(gate)
			wg.Wait()
			if got := syncs.Load() - 1; got > 1 {
				t.Errorf("%d datasyncs for %d queued adds (about 6 full groups), want them to share one", got, n)
			}
			j.Close()
			_, got := openT(t, fs, opts)
			checkComplete(t, got, 1, n+1)
		})
	}
}

// The groups of one commit are written together and none is durable before
// the commit's datasync, so a crash may lose the first while a later one
// reached the disk (write-back order is the kernel's). Replay must take
// that for a torn tail, not for damage to durable bytes: each group's
// durableBefore is where the commit started. Had a later group claimed the
// earlier ones durable, this replay would fail with ErrCorruption.
// (Serial journals only: a pipelined journal writes each group as it comes
// and its durableBefore is the last synced mark, which covers this too.)
func TestTornFirstGroupOfACommitIsATornTail(t *testing.T) {
	for name, opts := range map[string]Options{"serial": {}} {
		t.Run(name, func(t *testing.T) {
			var gating atomic.Bool
			first, gate := make(chan struct{}), make(chan struct{})
			var once sync.Once
			mem := engine.NewMem()
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string, _ int64) (errorfs.Fault, bool) {
				if op == errorfs.OpSync && strings.HasSuffix(path, ".journal") && gating.Load() {
					once.Do(func() { close(first); <-gate })
				}
				return errorfs.Fault{}, false
			}))
			opts.BufferedWritesThreshold = 16 << 10
			j, _ := openT(t, fs, opts)
			gating.Store(true)
			const n = 64
			marks := make([]Mark, n+1)
			var wg sync.WaitGroup
			wg.Add(n + 1)
			for e := int64(0); e <= n; e++ {
				if err := j.Add(1, e, payloadFor(1, e, sizeFor(1, e, 3000)), func(m Mark, err error) {
					if err != nil {
						t.Errorf("add %d: %v", e, err)
					}
					marks[e] = m
					wg.Done()
				}); err != nil {
					t.Fatal(err)
				}
				if e == 0 {
					<-first // entry 0 is being synced alone; the rest queue behind it
				}
			}
			close(gate)
			wg.Wait()
			j.Close()
			if marks[1] != marks[n] || marks[1] == marks[0] {
				t.Fatalf("entries 1..%d did not go in one commit after entry 0: marks %v, %v, %v", n, marks[0], marks[1], marks[n])
			}
			// Damage the first record's payload of the commit's first group.
			f, err := mem.OpenReadWrite(path.Join("/journal", fileName(marks[0].FileID)))
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 1)
			at := marks[0].Offset + groupHeaderSize + recordHeaderSize + 10
			if _, err := f.ReadAt(b, at); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0xff
			if _, err := f.WriteAt([][]byte{b}, at); err != nil {
				t.Fatal(err)
			}
			f.Close()
			var got []Entry
			j2, err := Open(mem, "/journal", opts, func(e Entry) error { got = append(got, e); return nil })
			if errors.Is(err, engine.ErrCorruption) {
				t.Fatalf("a torn first group of an unsynced commit was taken for corruption: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer j2.Close()
			if len(got) != 1 || got[0].EntryID != 0 {
				t.Fatalf("replayed %d entries, want entry 0 alone (the commit after it is a torn tail)", len(got))
			}
		})
	}
}

// Once an add is answered its payload is the caller's again: the journal
// keeps no reference to it (the broker's buffer would otherwise stay alive
// until the next commit, up to 8 groups of it).
func TestAnsweredPayloadsAreNotRetained(t *testing.T) {
	for name, opts := range map[string]Options{"serial": {}, "pipeline": {Pipeline: true}} {
		t.Run(name, func(t *testing.T) {
			j, _ := openT(t, engine.NewMem(), opts)
			defer j.Close()
			payload := payloadFor(1, 0, 3000)
			ref := weak.Make(&payload[0])
			if _, err := addSync(t, j, 1, 0, payload); err != nil {
				t.Fatal(err)
			}
			payload = nil
			for range 3 {
				runtime.GC()
			}
			if ref.Value() != nil {
				t.Fatal("the journal still holds an answered add's payload")
			}
		})
	}
}
