package perfledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// password is every benchmark ledger's.
const password = "magnetar-perf-ledger"

// diskBlock is the write+datasync block the disk's limit is taken at: 1
// MiB, close to its ceiling for synced sequential writes.
const diskBlock = 1 << 20

// metaTimeout bounds one metadata step of a point (create, close, open,
// delete a ledger; start a client).
const metaTimeout = time.Minute

// runner carries one run's state from point to point.
type runner struct {
	cfg      Config
	tmp      string    // the run's directory
	fs       engine.FS // the disk measurement's backend
	progress io.Writer
	pat      *pattern
	rep      *Report
	bookies  int // bookies that take adds
	points   int // points started, for their directory names
}

func newRunner(cfg Config, tmp string, progress io.Writer) (*runner, error) {
	fsys, err := engine.New(engine.Options{Backend: cfg.Backend, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	verify := strconv.Itoa(cfg.Verify)
	if cfg.Verify == VerifyAll {
		verify = "all"
	}
	maxSize := 0
	for _, s := range cfg.Sizes {
		maxSize = max(maxSize, s)
	}
	rep := &Report{Target: "in-process", Bookies: cfg.Bookies, Backend: fsys.Backend(), Storage: cfg.StorageName, Dir: tmp,
		Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), Outstanding: cfg.Outstanding, Digest: string(cfg.Digest), Verify: verify,
		GOMAXPROCS: runtime.GOMAXPROCS(0)}
	return &runner{cfg: cfg, tmp: tmp, fs: fsys, progress: progress, pat: newPattern(maxSize), rep: rep, bookies: cfg.Bookies}, nil
}

func (r *runner) close() error { return r.fs.Close() }

func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) remote() bool { return r.cfg.Store != nil }

func (r *runner) run() error {
	if r.remote() {
		n, err := writableBookies(r.cfg.Store)
		if err != nil {
			return err
		}
		r.bookies, r.rep.Bookies, r.rep.Target, r.rep.Storage = n, n, r.cfg.Target, ""
		r.note("target %s: its bookies' journals are not counted, and the disk limits are this machine's disk under %s, "+
			"which may not be theirs; the benchmark's ledgers are deleted afterwards", r.cfg.Target, r.tmp)
	}
	if err := r.diskBaseline(); err != nil {
		return fmt.Errorf("disk limits: %w", err)
	}
	fmt.Fprintln(r.progress, FormatHeader(r.rep))
	fmt.Fprintln(r.progress, pointHeader)
	for _, q := range r.cfg.Quorums {
		if q.Ensemble > r.bookies {
			r.note("quorum %s skipped: its ensemble of %d is more than the %d bookies", q, q.Ensemble, r.bookies)
			continue
		}
		for _, size := range r.cfg.Sizes {
			for _, n := range r.cfg.Writers {
				if err := r.point(q, n, size); err != nil {
					return fmt.Errorf("quorum %s, %d writers, %s entries: %w", q, n, perfdisk.SizeName(size), err)
				}
			}
		}
	}
	if len(r.rep.Points) == 0 {
		return fmt.Errorf("no quorum fits %d bookies", r.bookies)
	}
	return nil
}

// diskBaseline measures write+datasync of 1 MiB blocks and one
// datasync's latency in the run's directory, through its backend.
func (r *runner) diskBaseline() error {
	if r.cfg.DiskDuration == 0 {
		r.note("disk limits not measured (disk duration 0)")
		return nil
	}
	fmt.Fprintf(r.cfg.Live, "  .. measuring the disk under %s\n", r.tmp)
	dc := perfdisk.Config{Dir: r.tmp, Duration: r.cfg.DiskDuration}
	ws, err := perfdisk.WriteSync(r.fs, dc, "append", diskBlock)
	if err != nil {
		return fmt.Errorf("write+datasync at %s: %w", perfdisk.SizeName(diskBlock), err)
	}
	ds, err := perfdisk.DatasyncLatency(r.fs, dc)
	if err != nil {
		return fmt.Errorf("datasync: %w", err)
	}
	r.rep.Disk = &DiskLimits{Dir: r.tmp, WriteSync: ws, Datasync: ds}
	return nil
}

// startCluster starts the point's bookies, or names the running cluster.
func (r *runner) startCluster(name string) (*cluster, error) {
	if r.remote() {
		return &cluster{remote: r.cfg.Store}, nil
	}
	r.points++
	dir := filepath.Join(r.tmp, fmt.Sprintf("%02d-%s", r.points, name))
	return startCluster(r.cfg.Bookies, dir, r.cfg.Backend, r.cfg.Storage, r.cfg.Logger)
}

// point measures appends by n writers of size-byte entries to ledgers of
// quorum q, on a fresh cluster, then reads the ledgers back.
func (r *runner) point(q Quorum, n, size int) (err error) {
	cl, err := r.startCluster(fmt.Sprintf("e%dw%da%d-%dw-%s", q.Ensemble, q.WriteQuorum, q.AckQuorum, n, perfdisk.SizeName(size)))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	wc, err := r.newClient(cl)
	if err != nil {
		return err
	}
	defer wc.Close()
	handles, err := r.createLedgers(wc, q, n)
	if r.remote() {
		defer func() { err = errors.Join(err, deleteLedgers(wc, handles)) }()
	}
	if err != nil {
		return errors.Join(err, closeLedgers(handles))
	}
	ph := perfkit.NewPhase()
	ws := make([]*writer, n)
	for i, h := range handles {
		ws[i] = newWriter(ph, h, r.pat, size, r.cfg.Outstanding)
	}
	label := fmt.Sprintf("%-7s %4d writers %6s", q, n, perfdisk.SizeName(size))
	win, err := r.measureWindow(ph, label, ws, cl.counts)
	if err = errors.Join(err, closeLedgers(handles)); err != nil {
		return err
	}
	p := r.pointOf(q, n, size, ws, win)
	fmt.Fprintf(r.cfg.Live, "  .. %s  reading back\n", label)
	if err := r.verify(cl, ws, size, &p); err != nil {
		return err
	}
	r.rep.Points = append(r.rep.Points, p)
	fmt.Fprintln(r.progress, FormatPoint(p))
	return nil
}

func (r *runner) newClient(cl *cluster) (*ledger.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	c, err := ledger.New(ctx, ledger.Config{Store: cl.session(), AddTimeout: addTimeout, Logger: r.cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("start a ledger client: %w", err)
	}
	return c, nil
}

// createLedgers creates one ledger per writer; on failure it returns
// those it created (to be closed) with the error.
func (r *runner) createLedgers(c *ledger.Client, q Quorum, n int) ([]*ledger.WriteHandle, error) {
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	out := make([]*ledger.WriteHandle, 0, n)
	for range n {
		h, err := c.Create(ctx, ledger.CreateOptions{EnsembleSize: q.Ensemble, WriteQuorumSize: q.WriteQuorum,
			AckQuorumSize: q.AckQuorum, DigestType: r.cfg.Digest, Password: []byte(password)})
		if err != nil {
			return out, err
		}
		out = append(out, h)
	}
	return out, nil
}

// closeLedgers closes every handle (after a failure too: that stops its
// goroutines), returning what went wrong.
func closeLedgers(hs []*ledger.WriteHandle) error {
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	var errs []error
	for _, h := range hs {
		if err := h.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close ledger %d: %w", h.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// deleteLedgers removes a running cluster's benchmark ledgers; its
// bookies reclaim the entries through garbage collection.
func deleteLedgers(c *ledger.Client, hs []*ledger.WriteHandle) error {
	ctx, cancel := context.WithTimeout(context.Background(), metaTimeout)
	defer cancel()
	var errs []error
	for _, h := range hs {
		if err := c.Delete(ctx, h.ID()); err != nil {
			errs = append(errs, fmt.Errorf("delete benchmark ledger %d: %w", h.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// verify reads every writer's ledger back through a second client.
func (r *runner) verify(cl *cluster, ws []*writer, size int, p *Point) error {
	rc, err := r.newClient(cl)
	if err != nil {
		return err
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*metaTimeout)
	defer cancel()
	for _, w := range ws {
		res, err := verifyLedger(ctx, rc, r.pat, w.h.ID(), w.appended, size, r.cfg.Verify)
		if err != nil {
			return err
		}
		p.Appended += w.appended
		p.Verified += res.verified
		p.EnsembleChanges += res.fragments - 1
	}
	return nil
}

// measureWindow runs the writers through warm-up and the measured
// window, then waits for every append in flight.
func (r *runner) measureWindow(ph *perfkit.Phase, label string, ws []*writer, c *perfkit.Counters) (perfkit.Window, error) {
	runs := make([]func(), len(ws))
	for i, w := range ws {
		runs[i] = w.run
	}
	t := perfkit.Timing{Warmup: r.cfg.Warmup, Duration: r.cfg.Duration, Live: r.cfg.Live, Interval: r.cfg.ProgressInterval}
	return perfkit.MeasureWindow(t, ph, label, runs, c)
}

func (r *runner) pointOf(q Quorum, n, size int, ws []*writer, win perfkit.Window) Point {
	tallies := make([]*perfkit.Tally, len(ws))
	for i, w := range ws {
		tallies[i] = w.tally
	}
	rt := perfkit.RatesOf(tallies, size, win.Elapsed)
	p := Point{Quorum: q, Writers: n, EntrySize: size, Outstanding: r.cfg.Outstanding, Entries: rt.Entries, Seconds: rt.Seconds,
		EntriesPerSec: rt.EntriesPerSec, MiBPerSec: rt.MiBPerSec, LatencyUS: rt.LatencyUS}
	if win.Written > 0 {
		p.JournalMiBPerSec = float64(win.Written) / rt.Seconds / (1 << 20)
	}
	if win.Syncs > 0 {
		p.JournalSyncs, p.BytesPerSync = win.Syncs, float64(win.Written)/float64(win.Syncs)
	}
	if d := r.rep.Disk; d != nil && d.WriteSync.MiBPerSec > 0 {
		p.DiskFraction = p.MiBPerSec * float64(q.WriteQuorum) / d.WriteSync.MiBPerSec
	}
	return p
}
