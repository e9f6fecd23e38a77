package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/magnetar-io/magnetar/tools/perfclient"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// bench runs one benchmark: the server, the stream, the load, the report.
// The server this run started is stopped and its directory removed however
// the run ends.
func bench(ctx context.Context, cfg Config, live io.Writer) (*perfclient.Report, error) {
	t, nc, err := openTarget(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(live, "natsperf: %s at %s: %s\n", t.variant, t.url, t.info)
	rep, err := benchOn(ctx, cfg, t, nc, live)
	nc.Close()
	stopErr := t.close()
	switch {
	case err != nil:
		return nil, errors.Join(err, stopErr)
	case stopErr != nil:
		// The numbers were taken before; a slow shutdown does not void them.
		fmt.Fprintf(live, "natsperf: warning: stopping the server: %v\n", stopErr)
	}
	return rep, nil
}

func benchOn(ctx context.Context, cfg Config, t *target, nc *nats.Conn, live io.Writer) (*perfclient.Report, error) {
	maxBytes, err := streamMaxBytes(cfg, t.storeDir)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	if err := createStream(ctx, js, maxBytes); err != nil {
		return nil, err
	}
	l := &load{cfg: cfg, ph: perfkit.NewPhase()}
	// An interrupt ends the run like a failure: halt, drain, clean up.
	defer context.AfterFunc(ctx, func() { l.ph.Fail(fmt.Errorf("interrupted: %w", context.Cause(ctx))) })()
	defer l.close()
	if err := l.open(ctx, t.url); err != nil {
		return nil, err
	}
	w, err := l.measure(live)
	if err != nil {
		return nil, err
	}
	for _, msg := range l.warnings() {
		fmt.Fprintf(live, "natsperf: warning: %s\n", msg)
	}
	return l.report(w, t.variant), nil
}

// load is the clients of one run.
type load struct {
	cfg       Config
	ph        *perfkit.Phase
	producers []*producer
	cons      *consumer // nil in produce mode
}

// open connects the consumer first (so it sees every message) and then
// the producers.
func (l *load) open(ctx context.Context, url string) error {
	if l.cfg.Mode == modeE2E {
		c, err := startConsumer(ctx, url)
		if err != nil {
			return err
		}
		l.cons = c
	}
	for i := range l.cfg.Producers {
		p, err := newProducer(i, l.ph, url, l.cfg)
		if err != nil {
			return err
		}
		l.producers = append(l.producers, p)
	}
	return nil
}

func (l *load) close() {
	for _, p := range l.producers {
		p.close()
	}
	if l.cons != nil {
		l.cons.close()
	}
}

// window is what the measured window took, what the consumer received
// in it, and the progress over the run.
type window struct {
	elapsed  time.Duration
	received int64 // by receipt time, measured or not
	timeline []perfclient.Interval
}

// measure runs the producers: warm-up, the measured window, then halt and
// wait for every PubAck and, in e2e, for the consumer to catch up.
func (l *load) measure(live io.Writer) (window, error) {
	prog := startProgress(l, live)
	var wg sync.WaitGroup
	for _, p := range l.producers {
		wg.Go(p.run)
	}
	l.ph.Sleep(l.cfg.Warmup)
	begin, received := time.Now(), l.received()
	l.ph.Measuring.Store(true)
	l.ph.Sleep(l.cfg.Duration)
	l.ph.Measuring.Store(false)
	w := window{elapsed: time.Since(begin), received: l.received() - received}
	l.ph.Halt()
	wg.Wait()
	if l.ph.Err() == nil {
		l.awaitConsumer(live)
	}
	w.timeline = prog.stop()
	return w, l.ph.Err()
}

// awaitConsumer waits for the consumer to receive every acknowledged
// message; one that lags past the wait is reported with what it got.
func (l *load) awaitConsumer(live io.Writer) {
	if l.cons == nil {
		return
	}
	want := l.acked()
	wait := max(drainTimeout, l.cfg.Duration)
	if !l.cons.catchUp(want, wait) {
		fmt.Fprintf(live, "natsperf: warning: the consumer received %d of %d acknowledged messages within %s\n",
			l.cons.receivedAll.Load(), want, wait)
	}
}

// acked is every PubAck so far, measured or not.
func (l *load) acked() int64 {
	var n int64
	for _, p := range l.producers {
		n += p.ackedAll.Load()
	}
	return n
}

// received is every message the consumer got so far (0 without one).
func (l *load) received() int64 {
	if l.cons == nil {
		return 0
	}
	return l.cons.receivedAll.Load()
}
