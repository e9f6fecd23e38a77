// Package perfml measures managed ledgers the way standalone runs them: an
// in-process bookie (journal and entry logs on a real disk) reached
// through a LocalTransport, the ledger client and the ledger-backed
// managed ledgers. Three phases:
//
//   - append: producers append for Duration with Outstanding adds in
//     flight per topic while a tailing cursor per topic reads every entry
//     (checked) and acknowledges it; publish latency percentiles, the
//     tailing rate and the entry cache's hit ratio;
//   - backlog: each topic gets BacklogMB/Topics of entries nobody reads;
//   - catch-up: the bookie is restarted with its files evicted from the
//     page cache, the managed ledgers reopened through a new factory
//     (empty entry cache), and a new cursor per topic reads its whole
//     backlog from the bookie; its rate is set against the disk's cold
//     sequential read measured in the same run.
package perfml

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// Config of a run.
type Config struct {
	Dir          string        // journal and ledgers go under it (required)
	IOBackend    string        // auto, uring, std
	Topics       int           // default 1
	Size         int           // entry bytes (default 1024)
	Outstanding  int           // adds in flight per topic (default 256)
	Duration     time.Duration // append phase (default 5 s)
	BacklogMB    int           // catch-up backlog, all topics together (default 256; 0 skips)
	DiskDuration time.Duration // disk measurement (default 1 s; negative skips)
	Live         io.Writer     // progress lines (nil: none)
}

// Point is one measured phase.
type Point struct {
	Phase         string   `json:"phase"`
	Entries       int64    `json:"entries"`
	Seconds       float64  `json:"seconds"`
	EntriesPerSec float64  `json:"entries_per_sec"`
	MiBPerSec     float64  `json:"mib_per_sec"`
	Latency       *Latency `json:"latency_us,omitempty"`
}

// Latency percentiles in microseconds.
type Latency struct {
	P50   int64 `json:"p50"`
	P95   int64 `json:"p95"`
	P99   int64 `json:"p99"`
	P999  int64 `json:"p999"`
	P9999 int64 `json:"p9999"`
	Max   int64 `json:"max"`
}

func latencyOf(h *hdrhistogram.Histogram) *Latency {
	return &Latency{P50: h.ValueAtQuantile(50), P95: h.ValueAtQuantile(95), P99: h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9), P9999: h.ValueAtQuantile(99.99), Max: h.Max()}
}

// Report of a run.
type Report struct {
	Topics        int              `json:"topics"`
	Size          int              `json:"entry_bytes"`
	Backend       string           `json:"io_backend"`
	Append        Point            `json:"append"`
	Tailing       Point            `json:"tailing_read"`
	CacheHitRatio float64          `json:"cache_hit_ratio"`
	CatchUp       *Point           `json:"catch_up_read,omitempty"`
	DiskSeqRead   *perfdisk.Result `json:"disk_seqread,omitempty"`
	CatchUpOfDisk float64          `json:"catch_up_of_disk_seqread,omitempty"`
	Notes         []string         `json:"notes,omitempty"`
}

func (c Config) withDefaults() Config {
	if c.Topics <= 0 {
		c.Topics = 1
	}
	if c.Size < 16 {
		c.Size = 1024
	}
	if c.Outstanding <= 0 {
		c.Outstanding = 256
	}
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
	if c.DiskDuration == 0 {
		c.DiskDuration = time.Second
	}
	if c.IOBackend == "" {
		c.IOBackend = engine.BackendAuto
	}
	if c.Live == nil {
		c.Live = io.Discard
	}
	return c
}

// stack is the in-process storage.
type stack struct {
	cfg      Config
	fs       engine.FS
	meta     *metadata.MemoryServer
	jdir     string
	ldir     string
	core     *bookie.Core
	session  metadata.Store
	client   *ledger.Client
	factory  *managedledger.BKFactory
	clientSt metadata.Store
	tr       *ledger.LocalTransport
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func (s *stack) startBookie() error {
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return entrylog.Open(s.fs, []string{s.ldir}, entrylog.Options{Checkpointer: cp, Logger: quiet()})
	}
	core, err := bookie.OpenCore(s.fs, []string{s.jdir}, journal.Options{Logger: quiet()}, open,
		bookie.Options{LedgerDirs: []string{s.ldir}, Logger: quiet()})
	if err != nil {
		return err
	}
	s.core, s.session = core, s.meta.NewSession()
	_, err = registry.Register(context.Background(), s.session, registry.Registration{BookieID: "perf", Address: "in-process"}, quiet())
	return err
}

func (s *stack) startFactory() error {
	tr := ledger.NewLocalTransport()
	tr.Add("perf", s.core)
	s.tr = tr
	s.clientSt = s.meta.NewSession()
	var err error
	if s.client, err = ledger.New(context.Background(), ledger.Config{Store: s.clientSt, Transport: tr, Logger: quiet()}); err != nil {
		return err
	}
	s.factory, err = managedledger.NewBKFactory(managedledger.Config{Store: s.clientSt, Ledgers: s.client, Logger: quiet()})
	return err
}

func (s *stack) stopFactory() {
	s.client.Close()
	s.clientSt.Close()
	s.tr.Close() // its idle goroutines' grown stacks would count in the next measurement's heap
}

func (s *stack) stopBookie() error {
	err := s.core.Close()
	s.session.Close()
	return err
}

// payload is entry i of topic t: its index and topic up front, then a
// repeating byte, so a reader can check it.
func payload(t, i int, size int) []byte {
	b := bytes.Repeat([]byte{byte(t*31 + i)}, size)
	binary.BigEndian.PutUint32(b, uint32(t))
	binary.BigEndian.PutUint64(b[4:], uint64(i))
	return b
}

func check(t, i int, size int, got []byte) error {
	if !bytes.Equal(got, payload(t, i, size)) {
		return fmt.Errorf("topic %d entry %d: read %d bytes that differ from those appended", t, i, len(got))
	}
	return nil
}

// Run runs the three phases.
func Run(cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("perfml: Config.Dir is required")
	}
	fsys, err := engine.New(engine.Options{Backend: cfg.IOBackend, Logger: quiet()})
	if err != nil {
		return nil, err
	}
	s := &stack{cfg: cfg, fs: fsys, meta: metadata.NewMemoryServer(), jdir: filepath.Join(cfg.Dir, "journal"), ldir: filepath.Join(cfg.Dir, "ledgers")}
	rep := &Report{Topics: cfg.Topics, Size: cfg.Size, Backend: fsys.Backend()}
	if err := s.startBookie(); err != nil {
		return nil, err
	}
	if err := s.startFactory(); err != nil {
		s.stopBookie()
		return nil, err
	}
	if err := appendPhase(s, rep); err != nil {
		s.stopFactory()
		s.stopBookie()
		return nil, err
	}
	if cfg.BacklogMB > 0 {
		if err := catchUpPhase(s, rep); err != nil {
			return nil, err
		}
	} else {
		s.stopFactory()
		s.stopBookie()
	}
	return rep, nil
}

func topicName(t int) string { return fmt.Sprintf("perf/ns/persistent/t%d", t) }

// appendPhase appends and tails every topic for cfg.Duration.
func appendPhase(s *stack, rep *Report) error {
	cfg := s.cfg
	ctx := context.Background()
	mls := make([]managedledger.ManagedLedger, cfg.Topics)
	for t := range mls {
		ml, err := s.factory.Open(ctx, topicName(t))
		if err != nil {
			return err
		}
		mls[t] = ml
	}
	_, hits0, misses0 := s.factory.CacheStats()
	hist := hdrhistogram.New(1, 60_000_000, 3)
	var histMu sync.Mutex
	var appended, tailed atomic.Int64
	readErr := make(chan error, cfg.Topics)
	var readers sync.WaitGroup
	stopTail := make(chan struct{})
	counts := make([]int, cfg.Topics)
	for t, ml := range mls {
		c, err := ml.OpenCursor(ctx, "tail", managedledger.CursorOptions{Initial: managedledger.Latest})
		if err != nil {
			return err
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			readErr <- tail(c, t, cfg.Size, stopTail, &tailed)
		}()
	}
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	var writers sync.WaitGroup
	errs := make(chan error, cfg.Topics)
	for t, ml := range mls {
		writers.Add(1)
		go func() {
			defer writers.Done()
			sem := make(chan struct{}, cfg.Outstanding)
			for i := 0; time.Now().Before(deadline); i++ {
				sem <- struct{}{}
				sent := time.Now()
				ml.AddEntry(payload(t, i, cfg.Size), func(_ managedledger.Position, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
					histMu.Lock()
					_ = hist.RecordValue(max(time.Since(sent).Microseconds(), 1))
					histMu.Unlock()
					appended.Add(1)
					<-sem
				})
				counts[t] = i + 1
			}
			for range cfg.Outstanding {
				sem <- struct{}{}
			}
		}()
	}
	stopProgress := progress(cfg.Live, "append", start, deadline, &appended, &tailed)
	writers.Wait()
	stopProgress()
	elapsed := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return fmt.Errorf("append: %w", err)
	default:
	}
	total := int64(0)
	for _, n := range counts {
		total += int64(n)
	}
	waitUntil := time.Now().Add(30 * time.Second)
	for tailed.Load() < total && time.Now().Before(waitUntil) {
		time.Sleep(10 * time.Millisecond)
	}
	tailElapsed := time.Since(start).Seconds()
	close(stopTail)
	readers.Wait()
	close(readErr)
	for err := range readErr {
		if err != nil {
			return fmt.Errorf("tailing read: %w", err)
		}
	}
	if tailed.Load() != total {
		return fmt.Errorf("tailing readers got %d of %d entries", tailed.Load(), total)
	}
	_, hits, misses := s.factory.CacheStats()
	if h, m := hits-hits0, misses-misses0; h+m > 0 {
		rep.CacheHitRatio = float64(h) / float64(h+m)
	}
	rep.Append = point("append", total, elapsed, cfg.Size)
	rep.Append.Latency = latencyOf(hist)
	rep.Tailing = point("tailing read", total, tailElapsed, cfg.Size)
	for _, ml := range mls {
		if err := ml.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// tail reads every entry of topic t in order with ReadEntriesOrWait and
// acknowledges each batch.
func tail(c managedledger.Cursor, t, size int, stop <-chan struct{}, count *atomic.Int64) error {
	next := 0
	for {
		got := make(chan error, 1)
		c.ReadEntriesOrWait(100, 4<<20, func(es []managedledger.Entry, err error) {
			if err == nil {
				for _, e := range es {
					if err = check(t, next, size, e.Data); err != nil {
						break
					}
					next++
				}
				count.Add(int64(len(es)))
				if len(es) > 0 && err == nil {
					err = c.MarkDelete(context.Background(), es[len(es)-1].Position)
				}
			}
			got <- err
		})
		select {
		case err := <-got:
			if err != nil {
				return err
			}
		case <-stop:
			if c.CancelPendingRead() {
				return nil
			}
			return <-got
		}
	}
}

func point(phase string, n int64, secs float64, size int) Point {
	return Point{Phase: phase, Entries: n, Seconds: secs, EntriesPerSec: float64(n) / secs,
		MiBPerSec: float64(n) * float64(size) / secs / (1 << 20)}
}

func progress(w io.Writer, phase string, start, deadline time.Time, a, b *atomic.Int64) (stop func()) {
	if w == io.Discard {
		return func() {}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for time.Now().Before(deadline) {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "  %s %4.1fs: appended %d, tailed %d\n", phase, time.Since(start).Seconds(), a.Load(), b.Load())
			}
		}
	}()
	// The caller writes to w after the phase: the goroutine must be gone
	// by then, not just past its deadline.
	return func() {
		close(done)
		<-ended
	}
}

// catchUpPhase writes a backlog, restarts the bookie cold and reads it.
func catchUpPhase(s *stack, rep *Report) error {
	cfg := s.cfg
	ctx := context.Background()
	perTopic := max(1, cfg.BacklogMB<<20/cfg.Size/cfg.Topics)
	mls := make([]managedledger.ManagedLedger, cfg.Topics)
	for t := range mls {
		ml, err := s.factory.Open(ctx, topicName(t)+"-backlog")
		if err != nil {
			return err
		}
		mls[t] = ml
		sem := make(chan struct{}, cfg.Outstanding)
		errs := make(chan error, 1)
		for i := range perTopic {
			sem <- struct{}{}
			ml.AddEntry(payload(t, i, cfg.Size), func(_ managedledger.Position, err error) {
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
				<-sem
			})
		}
		for range cfg.Outstanding {
			sem <- struct{}{}
		}
		select {
		case err := <-errs:
			return fmt.Errorf("backlog: %w", err)
		default:
		}
		if err := ml.Close(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(cfg.Live, "  backlog of %d entries per topic written; restarting the bookie cold\n", perTopic)
	s.stopFactory()
	if err := s.stopBookie(); err != nil {
		return err
	}
	if err := dropCaches(s.fs, s.jdir, s.ldir); err != nil {
		rep.Notes = append(rep.Notes, "page cache not dropped ("+err.Error()+"): catch-up reads may be served from memory")
	}
	if err := s.startBookie(); err != nil {
		return err
	}
	defer s.stopBookie()
	if err := s.startFactory(); err != nil {
		return err
	}
	defer s.stopFactory()
	start := time.Now()
	var read int64
	for t := range mls {
		ml, err := s.factory.Open(ctx, topicName(t)+"-backlog")
		if err != nil {
			return err
		}
		c, err := ml.OpenCursor(ctx, "catchup", managedledger.CursorOptions{Initial: managedledger.Earliest})
		if err != nil {
			return err
		}
		for i := 0; i < perTopic; {
			es, err := c.ReadEntries(ctx, 1000, 8<<20)
			if err != nil {
				return fmt.Errorf("catch-up read: %w", err)
			}
			if len(es) == 0 {
				return fmt.Errorf("catch-up read of topic %d stopped at %d of %d entries", t, i, perTopic)
			}
			for _, e := range es {
				if err := check(t, i, cfg.Size, e.Data); err != nil {
					return err
				}
				i++
			}
			read += int64(len(es))
		}
		_ = ml.Close(ctx)
	}
	p := point("catch-up read", read, time.Since(start).Seconds(), cfg.Size)
	rep.CatchUp = &p
	return diskSeqRead(s, rep, int64(cfg.BacklogMB)<<20)
}

func diskSeqRead(s *stack, rep *Report, size int64) error {
	if s.cfg.DiskDuration < 0 {
		return nil
	}
	size = max(size, 8<<20)
	res, err := perfdisk.Run(perfdisk.Config{Dir: s.ldir, Backends: []string{s.fs.Backend()}, Duration: s.cfg.DiskDuration,
		ReadFile: (size + 1<<20 - 1) &^ (1<<20 - 1), ReadBlock: 1 << 20}, nil)
	if err != nil {
		return err
	}
	for _, r := range res.Results {
		if r.Test == "seqread" {
			rep.DiskSeqRead = &r
			if r.MiBPerSec > 0 {
				rep.CatchUpOfDisk = rep.CatchUp.MiBPerSec / r.MiBPerSec
			}
		}
	}
	return nil
}

// dropCaches evicts the files under dirs from the page cache.
func dropCaches(fsys engine.FS, dirs ...string) error {
	var errs []error
	for _, dir := range dirs {
		errs = append(errs, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := fsys.Open(path)
			if err != nil {
				return err
			}
			return errors.Join(f.DropCache(), f.Close())
		}))
	}
	return errors.Join(errs...)
}

// Format writes rep for people.
func Format(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "managed ledgers on an in-process bookie (%s backend), %d topic(s), %d-byte entries\n", rep.Backend, rep.Topics, rep.Size)
	l := rep.Append.Latency
	fmt.Fprintf(w, "append:       %9.0f entries/s %7.1f MiB/s   latency us p50 %d p95 %d p99 %d p99.9 %d p99.99 %d max %d\n",
		rep.Append.EntriesPerSec, rep.Append.MiBPerSec, l.P50, l.P95, l.P99, l.P999, l.P9999, l.Max)
	fmt.Fprintf(w, "tailing read: %9.0f entries/s %7.1f MiB/s   entry cache hit ratio %.3f\n", rep.Tailing.EntriesPerSec, rep.Tailing.MiBPerSec, rep.CacheHitRatio)
	if c := rep.CatchUp; c != nil {
		fmt.Fprintf(w, "catch-up:     %9.0f entries/s %7.1f MiB/s   (%d entries from the bookie after a cold restart)", c.EntriesPerSec, c.MiBPerSec, c.Entries)
		if rep.DiskSeqRead != nil {
			fmt.Fprintf(w, ", %.0f%% of the disk's cold sequential read (%.1f MiB/s)", 100*rep.CatchUpOfDisk, rep.DiskSeqRead.MiBPerSec)
		}
		fmt.Fprintln(w)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}
