package bookie

import (
	"fmt"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
)

// crashRig is a test bookie crashed again and again: a crash is a
// CrashClone of its mem engine (only what was synced survives), the next
// start opens the clone. Ledger storage is opened on the current clone the
// way ledgertest opens it (entry logs with default options, so the index
// is the one entrylog keeps for the mem engine), or is a Memory storage.
// at, when set, may take the crash image at a point inside a start: during
// journal replay or around the checkpoint the post-replay flush completes.
type crashRig struct {
	t        *testing.T
	tb       *testBookie
	entryLog bool
	acked    int // entries 0..acked-1 of ledger crashLedger were acknowledged

	// mu guards what storage hooks use: flushes call them on their own
	// goroutines.
	mu       sync.Mutex
	fs       *engine.MemFS
	starting bool
	at       func(point string) // "replay", "checkpoint:before", "checkpoint:after"
	image    *engine.MemFS      // taken by at during a start
}

const crashLedger = 5

func newCrashRig(t *testing.T, entryLog bool) *crashRig {
	r := &crashRig{t: t, fs: engine.NewMem(), entryLog: entryLog}
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		r.mu.Lock()
		r.starting = true
		fs := r.fs
		r.mu.Unlock()
		if !r.entryLog {
			return hookedStorage{entrylog.NewMemory(nil), r}, nil
		}
		st, err := entrylog.Open(fs, []string{"/ledgers"}, entrylog.Options{
			Checkpointer: hookedCheckpointer{cp, r}, Logger: quietLogger(), LogSizeLimit: 1 << 20})
		if err != nil {
			return nil, err
		}
		return hookedStorage{st, r}, nil
	}
	r.tb = startTestBookie(t, r.fs, open, ServerOptions{})
	r.setStarting(false)
	return r
}

func (r *crashRig) setStarting(v bool) {
	r.mu.Lock()
	r.starting = v
	r.mu.Unlock()
}

func (r *crashRig) setAt(at func(point string)) {
	r.mu.Lock()
	r.at = at
	r.mu.Unlock()
}

func (r *crashRig) hook(point string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.starting && r.at != nil && r.image == nil {
		r.at(point)
	}
}

// crashNowLocked keeps what a power failure now would leave.
func (r *crashRig) crashNowLocked() { r.image = r.fs.CrashClone(engine.CrashOptions{}) }

// restart crashes the bookie (at the image taken, else now) and starts it
// on what the crash left.
func (r *crashRig) restart() {
	r.t.Helper()
	r.mu.Lock()
	if r.image == nil {
		r.crashNowLocked()
	}
	image := r.image
	r.mu.Unlock()
	r.tb.stop()
	r.mu.Lock()
	r.fs, r.tb.fs, r.image = image, image, nil
	r.mu.Unlock()
	r.tb.start()
	r.setStarting(false)
}

// crashedDuringStart reports whether a hook took an image in the last start.
func (r *crashRig) crashedDuringStart() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.image != nil
}

func (r *crashRig) addN(n int) {
	r.t.Helper()
	for range n {
		e := r.acked
		if err := r.tb.add(crashLedger, int64(e), int64(e-1), payloadOf(e), 0); err != nil {
			r.t.Fatalf("add %d: %v", e, err)
		}
		r.acked++
	}
}

// check reads every acknowledged entry.
func (r *crashRig) check(when string) {
	r.t.Helper()
	for e := range r.acked {
		resp, err := r.tb.read(crashLedger, int64(e))
		if err != nil {
			r.t.Fatalf("%s: read entry %d of %d acknowledged: %v", when, e, r.acked, err)
		}
		mustPayload(r.t, resp, err, payloadOf(e))
	}
}

type hookedStorage struct {
	entrylog.Storage
	r *crashRig
}

func (s hookedStorage) AddEntry(ledgerID, entryID int64, data []byte) error {
	err := s.Storage.AddEntry(ledgerID, entryID, data)
	s.r.hook("replay")
	return err
}

type hookedCheckpointer struct {
	entrylog.Checkpointer
	r *crashRig
}

func (c hookedCheckpointer) CompleteCheckpoint(m entrylog.Checkpoint) error {
	c.r.hook("checkpoint:before")
	err := c.Checkpointer.CompleteCheckpoint(m)
	c.r.hook("checkpoint:after")
	return err
}

func storageName(entryLog bool) string {
	if entryLog {
		return "entrylog"
	}
	return "memory"
}

// TestRepeatedCrashes crashes a bookie n times in a row, with and without
// adds in between: every acknowledged entry must survive every crash. With
// entry-log storage on the mem engine the second crash lost every entry:
// each Open got a new, empty in-memory index, so once the post-replay
// flush had checkpointed the journal, nothing was left to find the entry
// logs' records with ("bookie: no such ledger").
func TestRepeatedCrashes(t *testing.T) {
	for _, entryLog := range []bool{true, false} {
		for n := 2; n <= 5; n++ {
			for _, between := range []int{0, 3} {
				t.Run(fmt.Sprintf("%s/crashes=%d/adds-between=%d", storageName(entryLog), n, between), func(t *testing.T) {
					r := newCrashRig(t, entryLog)
					r.addN(5)
					for i := range n {
						r.restart()
						r.check(fmt.Sprintf("after crash %d", i+1))
						r.addN(between)
					}
					r.restart()
					r.check("after the last crash")
				})
			}
		}
	}
}

// TestCrashDuringRestart crashes a bookie while it starts: in the middle
// of journal replay, just before and just after the checkpoint of the
// post-replay flush; then starts it twice more (a crash right after each
// start), with adds before each crash.
func TestCrashDuringRestart(t *testing.T) {
	points := []string{"replay", "checkpoint:before", "checkpoint:after"}
	for _, entryLog := range []bool{true, false} {
		for _, point := range points {
			if !entryLog && point != "replay" {
				continue // Memory storage never checkpoints
			}
			t.Run(storageName(entryLog)+"/"+point, func(t *testing.T) {
				r := newCrashRig(t, entryLog)
				r.addN(5)
				replayed := 0
				r.setAt(func(p string) {
					if p != point {
						return
					}
					if replayed++; p == "replay" && replayed < 3 {
						return // crash after the third replayed entry
					}
					r.crashNowLocked()
				})
				r.restart() // the first crash, then a start the hook crashes
				if !r.crashedDuringStart() {
					t.Fatalf("the start never reached %q", point)
				}
				r.setAt(nil)
				r.restart()
				r.check("after a crash during a start")
				for i := range 3 {
					r.addN(2)
					r.restart()
					r.check(fmt.Sprintf("after crash %d after it", i+1))
				}
			})
		}
	}
}
