package perfclient

import (
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/internal/proccpu"
)

// windowCPU is this process's CPU time over the measured window, so a
// report can say whether the client was the limit: CPU over the process's
// whole life also counts creating producers (for 10,000 topics, many
// seconds of little CPU) and waiting at a start barrier, and made a
// saturated client look half idle.
type windowCPU struct {
	mu         sync.Mutex
	startCPU   time.Duration
	startWall  time.Time // zero until the window starts
	timer      *time.Timer
	cores      float64 // set by stop
	stopCalled bool
}

// startAt samples the process's CPU once at is reached (the window's
// start).
func (w *windowCPU) startAt(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(time.Until(at), func() {
		cpu, ok := processCPU()
		w.mu.Lock()
		defer w.mu.Unlock()
		if ok && !w.stopCalled {
			w.startCPU, w.startWall = cpu, time.Now()
		}
	})
}

// stop samples again and keeps CPU seconds per second of the window
// (0 if the window never started or the clock cannot be read).
func (w *windowCPU) stop() {
	cpu, ok := processCPU()
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopCalled {
		return
	}
	w.stopCalled = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if wall := now.Sub(w.startWall); ok && !w.startWall.IsZero() && wall > 0 {
		w.cores = (cpu - w.startCPU).Seconds() / wall.Seconds()
	}
}

func (w *windowCPU) value() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cores
}

func processCPU() (time.Duration, bool) {
	d, err := proccpu.Used()
	return d, err == nil
}
