package main

import (
	"fmt"
	"io"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// progress prints a live line every --progress and keeps each interval's
// rates for the report's timeline.
type progress struct {
	l        *load
	live     io.Writer
	done     chan struct{} // closed by stop
	finished chan struct{} // closed when the loop returned
	timeline []perfclient.Interval
}

func startProgress(l *load, live io.Writer) *progress {
	p := &progress{l: l, live: live, done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(p.finished)
		p.loop()
	}()
	return p
}

// stop ends the loop and returns the timeline, which only the loop
// wrote.
func (p *progress) stop() []perfclient.Interval {
	close(p.done)
	<-p.finished
	return p.timeline
}

// loop is bounded by the run: a tick per interval until stop.
func (p *progress) loop() {
	tick := time.NewTicker(p.l.cfg.Progress)
	defer tick.Stop()
	begin, last := time.Now(), time.Now()
	var lastPub, lastCon int64
	for {
		select {
		case <-p.done:
			return
		case now := <-tick.C:
			pub, con := p.l.acked(), p.l.received()
			s := now.Sub(last).Seconds()
			iv := perfclient.Interval{At: now.Sub(begin).Seconds(),
				PublishPS: float64(pub-lastPub) / s, ConsumePS: float64(con-lastCon) / s}
			p.timeline = append(p.timeline, iv)
			p.print(iv)
			last, lastPub, lastCon = now, pub, con
		}
	}
}

func (p *progress) print(iv perfclient.Interval) {
	mib := iv.PublishPS * float64(p.l.cfg.Size) / (1 << 20)
	fmt.Fprintf(p.live, "  .. natsperf %6.1fs %-9s publish %9.0f msg/s %8.1f MiB/s", iv.At, p.state(), iv.PublishPS, mib)
	if p.l.cons != nil {
		fmt.Fprintf(p.live, "  consume %9.0f msg/s", iv.ConsumePS)
	}
	fmt.Fprintln(p.live)
}

func (p *progress) state() string {
	switch {
	case p.l.ph.Stopped():
		return "draining" // the window closed; waiting for PubAcks and the consumer
	case p.l.ph.Measuring.Load():
		return "measuring"
	}
	return "warm-up"
}
