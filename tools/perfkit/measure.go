package perfkit

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Timing is how a tool runs and shows its loads.
type Timing struct {
	Warmup   time.Duration // unmeasured load before the window
	Duration time.Duration // the measured window
	// Live gets a progress line every Interval while a load runs.
	Live     io.Writer
	Interval time.Duration
}

// Window is what one measured window took and what the journals did in
// it (zero counts when they are not seen).
type Window struct {
	Elapsed        time.Duration
	Syncs, Written int64
}

// MeasureWindow runs the loads: warm-up, the measured window, then halt
// and wait for every request in flight. With c it also counts what the
// journals did within the window.
func MeasureWindow(t Timing, ph *Phase, label string, runs []func(), c *Counters) (Window, error) {
	defer Live(t, ph, label)()
	wg := start(runs)
	ph.Sleep(t.Warmup)
	var w Window
	if c != nil {
		w.Syncs, w.Written = -c.Syncs.Load(), -c.Bytes.Load()
	}
	begin := time.Now()
	ph.Measuring.Store(true)
	ph.Sleep(t.Duration)
	ph.Measuring.Store(false)
	w.Elapsed = time.Since(begin)
	if c != nil {
		w.Syncs, w.Written = w.Syncs+c.Syncs.Load(), w.Written+c.Bytes.Load()
	}
	ph.Halt()
	wg.Wait()
	return w, ph.Err()
}

// MeasureAll runs loads that end on their own, measuring all of it.
func MeasureAll(t Timing, ph *Phase, label string, runs []func()) (time.Duration, error) {
	defer Live(t, ph, label)()
	ph.Measuring.Store(true)
	begin := time.Now()
	start(runs).Wait()
	return time.Since(begin), ph.Err()
}

func start(runs []func()) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(run)
	}
	return &wg
}

// Live prints a progress line for ph every t.Interval until the returned
// function is called, so a long point shows it is moving and how fast.
func Live(t Timing, ph *Phase, label string) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		liveLoop(t, ph, label, done)
	}()
	return func() { close(done); <-finished }
}

func liveLoop(t Timing, ph *Phase, label string, done <-chan struct{}) {
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	begin, last := time.Now(), time.Now()
	var lastOps, lastBytes int64
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			ops, bytes := ph.Ops.Load(), ph.Bytes.Load()
			s := now.Sub(last).Seconds()
			fmt.Fprintf(t.Live, "  .. %s  %5.1fs %-9s %10.0f entries/s %9.1f MiB/s\n", label,
				now.Sub(begin).Seconds(), state(ph), float64(ops-lastOps)/s, float64(bytes-lastBytes)/s/(1<<20))
			last, lastOps, lastBytes = now, ops, bytes
		}
	}
}

func state(ph *Phase) string {
	switch {
	case ph.Stopped():
		return "draining" // the window closed; waiting for requests in flight
	case ph.Measuring.Load():
		return "measuring"
	}
	return "warm-up"
}
