package entrylog

import (
	"bytes"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// fakeClock advances only when the pacer sleeps.
type fakeClock struct {
	t     time.Time
	slept time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(d time.Duration) {
	c.t = c.t.Add(d)
	c.slept += d
}

// A paced write of N bytes takes N / rate, whatever the chunks, and no
// time at all once ingest needs the room.
func TestPacerSpreadsWritesAtItsRate(t *testing.T) {
	for _, hurry := range []bool{false, true} {
		c := &fakeClock{t: time.Unix(1000, 0)}
		p := newPacer(4<<20, func() bool { return hurry }, c.now, c.sleep)
		for _, n := range []int64{1 << 20, 1 << 20, 512 << 10, 512 << 10, 1 << 20} {
			p.wrote(n)
		}
		want := time.Second // 4 MiB at 4 MiB/s
		if hurry {
			want = 0
		}
		if c.slept != want {
			t.Fatalf("hurry=%v: slept %v, want %v", hurry, c.slept, want)
		}
	}
	var p *pacer
	p.wrote(1 << 30) // nil: no pacing, no panic
}

// A write slower than the rate is not slowed further.
func TestPacerDoesNotSleepBehindASlowDisk(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := newPacer(4<<20, func() bool { return false }, c.now, c.sleep)
	c.t = c.t.Add(2 * time.Second) // the first MiB took 2 s to write
	p.wrote(1 << 20)
	if c.slept != 0 {
		t.Fatalf("slept %v after a write slower than the rate", c.slept)
	}
}

// With a flush rate far below the ingest rate, adds are never held back by
// the pace: a flush hurries once the active half is half full or an add
// waits, so no add fails with ErrWriteCacheFull and every entry reads back.
func TestPacedFlushNeverThrottlesIngest(t *testing.T) {
	opts := Options{WriteCacheMaxSize: 8 << 20, FlushRate: 64 << 10, MaxThrottleTime: 20 * time.Second,
		FlushInterval: 10 * time.Millisecond, GCWaitTime: -1}
	db := openTest(t, engine.NewMem(), vfs.NewMem(), []string{"/d0"}, opts)
	defer db.Close()
	data := bytes.Repeat([]byte{7}, 16<<10)
	const n = 2048 // 32 MiB: 8 halves of 4 MiB (4 chunks each); unhurried, at 64 KiB/s, 8 minutes
	start := time.Now()
	for e := int64(0); e < n; e++ {
		mustDo(t, db.AddEntry(1, e, data))
	}
	// Held back by the pacer, these adds would take 8 minutes or fail
	// with ErrWriteCacheFull after MaxThrottleTime; unhurried they take
	// well under a second. The bound is far from both, so a loaded CI
	// host (a 15 s bound failed there under -race) cannot trip it.
	if took := time.Since(start); took > 2*time.Minute {
		t.Fatalf("32 MiB of adds took %v: the paced flush held ingest back", took)
	}
	for e := int64(0); e < n; e += 97 {
		got, err := db.ReadEntry(1, e)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("entry %d: %v", e, err)
		}
	}
}

// A pacer that starts a long wait stops it as soon as ingest needs it to.
func TestPacerStopsWaitingWhenPressed(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	pressed := false
	p := newPacer(64<<10, func() bool { return pressed }, c.now,
		func(d time.Duration) { c.sleep(d); pressed = c.slept >= 50*time.Millisecond })
	p.wrote(1 << 20) // 16 s at 64 KiB/s
	if c.slept < 50*time.Millisecond || c.slept > 50*time.Millisecond+paceStep {
		t.Fatalf("slept %v; pressed after 50 ms, so it should have stopped then", c.slept)
	}
}
