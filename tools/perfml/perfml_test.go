package perfml

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestRunShort: a short run completes every phase, every entry read back
// was checked (Run fails otherwise), and the numbers are consistent.
func TestRunShort(t *testing.T) {
	rep, err := Run(Config{Dir: t.TempDir(), IOBackend: "std", Topics: 2, Size: 512, Outstanding: 32,
		Duration: 300 * time.Millisecond, BacklogMB: 2, DiskDuration: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Append.Entries == 0 || rep.Append.EntriesPerSec <= 0 || rep.Tailing.Entries != rep.Append.Entries {
		t.Fatalf("append %+v tailing %+v", rep.Append, rep.Tailing)
	}
	l := rep.Append.Latency
	if l.P50 > l.P99 || l.P99 > l.Max {
		t.Fatalf("percentiles out of order: %+v", l)
	}
	if rep.CatchUp == nil || rep.CatchUp.Entries != int64(2*(2<<20/512/2)) {
		t.Fatalf("catch-up %+v", rep.CatchUp)
	}
	if rep.CacheHitRatio < 0 || rep.CacheHitRatio > 1 {
		t.Fatalf("hit ratio %v", rep.CacheHitRatio)
	}
}

func TestCheckCatchesWrongBytes(t *testing.T) {
	b := payload(1, 7, 64)
	if err := check(1, 7, 64, b); err != nil {
		t.Fatal(err)
	}
	b[20]++
	if check(1, 7, 64, b) == nil {
		t.Fatal("a changed byte passed the check")
	}
	if check(1, 8, 64, payload(1, 7, 64)) == nil {
		t.Fatal("another entry's bytes passed the check")
	}
}

func TestMeasureTopics(t *testing.T) {
	// Enough topics that their cost (about 8 KiB each) stands well above
	// the noise of the heap and goroutine stacks around them: with 50 the
	// difference came out negative once in CI.
	rep, err := MeasureTopics(t.TempDir(), "std", 500)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d topics: %.0f bytes each", rep.Topics, rep.BytesPerTopic)
	if rep.Topics != 500 || rep.BytesPerTopic <= 0 {
		t.Fatalf("%+v", rep)
	}
}

// slowWriter counts writes in progress; each takes a while.
type slowWriter struct{ busy, writes atomic.Int64 }

func (w *slowWriter) Write(p []byte) (int, error) {
	w.busy.Add(1)
	defer w.busy.Add(-1)
	w.writes.Add(1)
	time.Sleep(300 * time.Millisecond)
	return len(p), nil
}

// TestProgressStopWaitsForItsWrite: once stop returns, the progress
// goroutine writes no more, also when a tick's write was under way (the
// caller writes the next phase's lines to the same writer: CI's race
// detector caught the two writing at once).
func TestProgressStopWaitsForItsWrite(t *testing.T) {
	w := &slowWriter{}
	var a, b atomic.Int64
	start := time.Now()
	stop := progress(w, "append", start, start.Add(1500*time.Millisecond), &a, &b)
	for w.busy.Load() == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("no progress line written")
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if w.busy.Load() != 0 {
		t.Fatal("a progress line was still being written after stop returned")
	}
	n := w.writes.Load()
	time.Sleep(1500 * time.Millisecond)
	if w.writes.Load() != n {
		t.Fatalf("%d progress lines written after stop", w.writes.Load()-n)
	}
}
