package perfkit

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
)

// TestCountingFS checks the wrapper counts a serial journal's groups
// exactly: one datasync and one block per lone add, nothing for the
// header sync at creation or the checkpoint.
func TestCountingFS(t *testing.T) {
	c := &Counters{}
	fs := NewCountingFS(engine.NewMem(), c)
	j, err := journal.Open(fs, "/j", journal.Options{Logger: slog.New(slog.DiscardHandler)}, func(journal.Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		done := make(chan error, 1)
		if err := j.Add(1, int64(i), make([]byte, 100), func(_ journal.Mark, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Checkpoint(j.LastMark()); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Syncs.Load() != 10 || c.Bytes.Load() != 10*journal.BlockSize {
		t.Fatalf("counted %d syncs and %d bytes, want 10 and %d", c.Syncs.Load(), c.Bytes.Load(), 10*journal.BlockSize)
	}
}

func TestStartProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	stop, err := StartProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu.pprof", "allocs.pprof"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestMeasureWindow checks the loads run until halted, the window counts
// only what the journal did inside it, and the live line shows the load.
func TestMeasureWindow(t *testing.T) {
	ph := NewPhase()
	c := &Counters{}
	tally := NewTally()
	run := func() {
		for !ph.Stopped() {
			c.Syncs.Add(1)
			if ph.Measuring.Load() {
				tally.Record(time.Millisecond)
			}
			ph.Completed(100)
			time.Sleep(time.Millisecond)
		}
	}
	var live bytes.Buffer
	tm := Timing{Warmup: 20 * time.Millisecond, Duration: 50 * time.Millisecond, Live: &live, Interval: 10 * time.Millisecond}
	w, err := MeasureWindow(tm, ph, "test", []func(){run}, c)
	if err != nil {
		t.Fatal(err)
	}
	if w.Elapsed < tm.Duration || w.Syncs <= 0 || w.Syncs >= c.Syncs.Load() {
		t.Fatalf("window %+v, %d syncs in all", w, c.Syncs.Load())
	}
	if rt := RatesOf([]*Tally{tally}, 100, w.Elapsed); rt.Entries == 0 || rt.LatencyUS.P50 < 900 {
		t.Fatalf("rates %+v", rt)
	}
	if !strings.Contains(live.String(), "  .. test ") {
		t.Fatalf("live lines %q", live.String())
	}
}

// TestPhaseFail checks the first failure is kept and halts the phase.
func TestPhaseFail(t *testing.T) {
	ph := NewPhase()
	first := errors.New("first")
	ph.Fail(first)
	ph.Fail(errors.New("second"))
	if !ph.Stopped() || !errors.Is(ph.Err(), first) {
		t.Fatalf("stopped %v, err %v", ph.Stopped(), ph.Err())
	}
	ph.Sleep(time.Hour) // returns at once: the phase halted
}
