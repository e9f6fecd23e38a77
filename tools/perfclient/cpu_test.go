package perfclient

import (
	"testing"
	"time"
)

// burn keeps this goroutine on the CPU for d.
func burn(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// TestWindowCPUCountsTheWindowOnly: CPU spent before the window (creating
// producers, a start barrier) is not the window's. A busy second before a
// quiet window reads near 0 cores; a busy window reads near 1.
func TestWindowCPUCountsTheWindowOnly(t *testing.T) {
	var quiet windowCPU
	quiet.startAt(time.Now().Add(300 * time.Millisecond))
	burn(300 * time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the window's start is sampled
	time.Sleep(300 * time.Millisecond)
	quiet.stop()
	if got := quiet.value(); got < 0 || got > 0.3 {
		t.Fatalf("a quiet window after a busy warm-up read %.2f cores, want at most 0.3", got)
	}

	var busy windowCPU
	busy.startAt(time.Now())
	time.Sleep(20 * time.Millisecond)
	burn(300 * time.Millisecond)
	busy.stop()
	if got := busy.value(); got < 0.25 { // a loaded machine may give the loop less than its core
		t.Fatalf("a busy window read %.2f cores, want about 1", got)
	}
}

// TestWindowCPUNeverStarted: a run stopped before its window began reports
// nothing rather than a figure of the warm-up.
func TestWindowCPUNeverStarted(t *testing.T) {
	var w windowCPU
	w.startAt(time.Now().Add(time.Hour))
	burn(20 * time.Millisecond)
	w.stop()
	if got := w.value(); got != 0 {
		t.Fatalf("a window that never started read %.2f cores", got)
	}
}
