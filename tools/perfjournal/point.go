package perfjournal

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// measurer runs the points of one backend and caches the disk's limits,
// which many points share (every single-writer point's group is 4 KiB).
type measurer struct {
	fs   engine.FS
	cfg  Config
	disk map[diskKey]perfdisk.Result
}

type diskKey struct {
	mode  string
	block int
}

// diskAt is perfdisk's write+datasync at block bytes, one at a time.
func (m *measurer) diskAt(mode string, block int) (perfdisk.Result, error) {
	k := diskKey{mode, block}
	if r, ok := m.disk[k]; ok {
		return r, nil
	}
	r, err := perfdisk.WriteSync(m.fs, m.diskConfig(), mode, block)
	if err != nil {
		return perfdisk.Result{}, fmt.Errorf("disk limit at %d bytes: %w", block, err)
	}
	m.disk[k] = r
	return r, nil
}

func (m *measurer) diskConfig() perfdisk.Config {
	return perfdisk.Config{Dir: m.cfg.Dir, Duration: m.cfg.DiskDuration}
}

// baseline measures one datasync per 4 KiB entry (fresh file, and an
// allocated one when reuse is measured) and one datasync's latency.
func (m *measurer) baseline() (Baseline, error) {
	b := Baseline{Backend: m.fs.Backend()}
	var err error
	if b.PerEntry, err = m.diskAt("append", journal.BlockSize); err != nil {
		return b, err
	}
	for _, r := range m.cfg.Reuse {
		if r {
			ow, err := m.diskAt("overwrite", journal.BlockSize)
			if err != nil {
				return b, err
			}
			b.PerEntryOverwrite = &ow
			break
		}
	}
	if b.Datasync, err = perfdisk.DatasyncLatency(m.fs, m.diskConfig()); err != nil {
		return b, fmt.Errorf("datasync latency: %w", err)
	}
	return b, nil
}

// point measures one journal configuration in a fresh directory, then the
// disk's limit at the group size it reached.
func (m *measurer) point(v Variant, size, writers int) (Point, error) {
	dir := filepath.Join(m.cfg.Dir, "magnetar-perfjournal-"+m.fs.Backend())
	if err := removeDir(m.fs, dir); err != nil {
		return Point{}, err
	}
	p, err := m.drivePoint(dir, v, size, writers)
	if err = errors.Join(err, removeDir(m.fs, dir)); err != nil {
		return Point{}, err
	}
	if p.Datasyncs == 0 || v.SkipSync {
		return p, nil // without a datasync per group there is no disk limit to compare with
	}
	mode := "append" // fresh files are preallocated, so every group allocates as appending does
	if v.ReuseFiles {
		mode = "overwrite"
	}
	p.DiskBlock = roundBlock(p.BytesPerSync)
	d, err := m.diskAt(mode, p.DiskBlock)
	if err != nil {
		return Point{}, err
	}
	p.Disk = &d
	if d.MiBPerSec > 0 {
		p.BandwidthFraction = p.MiBPerSec / d.MiBPerSec
	}
	return p, nil
}

// roundBlock rounds bytes to the nearest multiple of 4 KiB, at least 4 KiB.
func roundBlock(bytes float64) int {
	b := int(bytes+journal.BlockSize/2) / journal.BlockSize * journal.BlockSize
	return max(b, journal.BlockSize)
}

func (m *measurer) journalOptions(v Variant) journal.Options {
	wait := time.Duration(v.MaxGroupWaitUS) * time.Microsecond
	if wait == 0 {
		wait = -1 // the journal reads 0 as "default (1 ms)"; negative means never linger
	}
	return journal.Options{MaxGroupWait: wait, Pipeline: v.Pipeline, NoFileReuse: !v.ReuseFiles, SkipSync: v.SkipSync,
		MaxFileSize: m.cfg.MaxFileSize, Logger: discardLogger()}
}

// drivePoint opens the journal through the counting wrapper, runs the
// load with a checkpointer beside it, and closes the journal.
func (m *measurer) drivePoint(dir string, v Variant, size, writers int) (Point, error) {
	opts := m.journalOptions(v)
	if v.ReuseFiles {
		if err := primeRecycled(m.fs, dir, opts); err != nil {
			return Point{}, fmt.Errorf("priming recycled files: %w", err)
		}
	}
	c := &perfkit.Counters{}
	j, err := journal.Open(perfkit.NewCountingFS(m.fs, c), dir, opts, func(journal.Entry) error { return nil })
	if err != nil {
		return Point{}, err
	}
	stop := make(chan struct{})
	ckErr := make(chan error, 1)
	go func() { ckErr <- checkpointer(j, stop) }()
	l := newLoad(j, size, m.cfg.Inflight)
	w := l.run(writers, m.cfg.Warmup, m.cfg.Duration, c)
	close(stop)
	err = errors.Join(l.failure(), <-ckErr, j.Close())
	p := Point{Backend: m.fs.Backend(), Variant: v, EntrySize: size, Writers: writers, Inflight: m.cfg.Inflight}
	w.fill(&p, l.hist)
	return p, err
}

// checkpointer stands in for ledger storage: whenever the journal has
// moved to a new file it checkpoints the latest mark, so finished files
// are deleted or recycled as on a bookie whose entry logs keep up. Once
// per file keeps its own syncs off the disk the journal is measured on.
func checkpointer(j *journal.Journal, stop <-chan struct{}) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	last := j.LastMark().FileID
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		if m := j.LastMark(); m.FileID > last {
			if err := j.Checkpoint(m); err != nil {
				return err
			}
			last = m.FileID
		}
	}
}

// removeDir removes a journal directory (files only) left by a point.
func removeDir(fs engine.FS, dir string) error {
	names, err := fs.List(dir)
	if engine.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := fs.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return fs.Remove(dir)
}

// load is the closed-loop writers: each keeps Inflight adds outstanding
// and issues the next one only when one is acknowledged.
type load struct {
	j         *journal.Journal
	payload   []byte // shared and never written: the journal only reads it
	inflight  int
	stop      atomic.Bool
	measuring atomic.Bool
	acked     atomic.Int64 // acknowledged while measuring

	mu   sync.Mutex // callbacks may come from the journal's writer and its sync goroutine
	hist *hdrhistogram.Histogram
	err  error
}

func newLoad(j *journal.Journal, size, inflight int) *load {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7) // not all zeros, so nothing below can shortcut them
	}
	return &load{j: j, payload: payload, inflight: inflight, hist: perfdisk.NewHist()}
}

// window is what the counters moved by during the measured time.
type window struct {
	elapsed        time.Duration
	entries        int64
	syncs, written int64
}

// run starts the writers, lets them warm up (the journal's adaptive
// linger learns the arrival rate), measures for d, then stops issuing and
// waits for every add in flight.
func (l *load) run(writers int, warmup, d time.Duration, c *perfkit.Counters) window {
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go l.writer(int64(i), &wg)
	}
	time.Sleep(warmup)
	syncs0, written0 := c.Syncs.Load(), c.Bytes.Load()
	start := time.Now()
	l.measuring.Store(true)
	time.Sleep(d)
	l.measuring.Store(false)
	w := window{elapsed: time.Since(start), entries: l.acked.Load(),
		syncs: c.Syncs.Load() - syncs0, written: c.Bytes.Load() - written0}
	l.stop.Store(true)
	wg.Wait()
	return w
}

func (l *load) writer(ledger int64, wg *sync.WaitGroup) {
	defer wg.Done()
	tokens := make(chan struct{}, l.inflight)
	for range l.inflight {
		tokens <- struct{}{}
	}
	for entry := int64(0); ; entry++ {
		<-tokens
		if l.stop.Load() {
			tokens <- struct{}{}
			break
		}
		start := time.Now()
		cb := func(_ journal.Mark, err error) { l.done(start, err); tokens <- struct{}{} }
		if err := l.j.Add(ledger, entry, l.payload, cb); err != nil {
			l.fail(err)
			tokens <- struct{}{}
			break
		}
	}
	for range l.inflight { // wait for every add in flight
		<-tokens
	}
}

// done records one acknowledgement. It runs on the journal's goroutine,
// so it only takes an uncontended lock and never blocks.
func (l *load) done(start time.Time, err error) {
	if err != nil {
		l.fail(err)
		return
	}
	if !l.measuring.Load() {
		return
	}
	us := min(time.Since(start).Microseconds(), perfkit.HistMaxUS) // clamped: out-of-range values would be dropped
	l.mu.Lock()
	_ = l.hist.RecordValue(us)
	l.mu.Unlock()
	l.acked.Add(1)
}

func (l *load) fail(err error) {
	l.stop.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *load) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// fill derives the point's rates from the window.
func (w window) fill(p *Point, h *hdrhistogram.Histogram) {
	s := w.elapsed.Seconds()
	p.Entries, p.Seconds, p.Datasyncs = w.entries, s, w.syncs
	p.EntriesPerSec = float64(w.entries) / s
	p.MiBPerSec = float64(w.entries) * float64(p.EntrySize) / s / (1 << 20)
	p.WrittenMiBPerSec = float64(w.written) / s / (1 << 20)
	p.LatencyUS = *perfdisk.LatencyOf(h)
	if w.syncs > 0 {
		p.EntriesPerSync = float64(w.entries) / float64(w.syncs)
		p.BytesPerSync = float64(w.written) / float64(w.syncs)
	}
}
