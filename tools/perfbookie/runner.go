package perfbookie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// runner carries one run's state from point to point.
type runner struct {
	cfg        Config
	fs         engine.FS
	dirs       runDirs
	progress   io.Writer
	pat        *pattern
	rep        *Report
	nextLedger int64
	points     int                     // bookies started, for their directory names
	diskAt     map[int]perfdisk.Result // write+datasync by block size
}

func newRunner(cfg Config, fsys engine.FS, dirs runDirs, progress io.Writer) *runner {
	rep := &Report{Target: "in-process", Backend: fsys.Backend(), Storage: cfg.StorageName, JournalDir: dirs.journal,
		LedgerDir: dirs.ledger, Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(),
		Outstanding: cfg.Outstanding, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if cfg.Addr != "" {
		rep.Target, rep.Storage, rep.LedgerDir = cfg.Addr, "", ""
	}
	return &runner{cfg: cfg, fs: fsys, dirs: dirs, progress: progress, pat: newPattern(cfg.maxSize()), rep: rep,
		nextLedger: cfg.LedgerBase, diskAt: map[int]perfdisk.Result{}}
}

func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) run() error {
	if r.cfg.Addr != "" {
		if err := checkRemote(r.cfg.Addr); err != nil {
			return err
		}
		r.note("target %s: group sizes are not counted and the disk limits are this machine's disk under %s, "+
			"which may not be the bookie's", r.cfg.Addr, r.dirs.journal)
	}
	if r.cfg.DiskDuration > 0 {
		fmt.Fprintf(r.cfg.Live, "  .. measuring the disk under %s\n", r.dirs.journal)
	}
	if err := r.diskBaseline(); err != nil {
		return fmt.Errorf("disk limits: %w", err)
	}
	fmt.Fprintln(r.progress, FormatHeader(r.rep))
	fmt.Fprintln(r.progress, pointHeader)
	for _, size := range r.cfg.Sizes {
		for _, n := range r.cfg.Clients {
			if err := r.point(n, size); err != nil {
				return fmt.Errorf("%d clients, %s entries: %w", n, perfdisk.SizeName(size), err)
			}
		}
	}
	if err := r.coldRead(); err != nil {
		return fmt.Errorf("cold read: %w", err)
	}
	return nil
}

// checkRemote asks the bookie at addr for its info: it answers the
// protocol and takes adds.
func checkRemote(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := cl.Do(ctx, &bkproto.Request{Op: bkproto.OpInfo})
	if err != nil {
		return fmt.Errorf("bookie %s: info: %w", addr, err)
	}
	if resp.InfoFlags&bkproto.InfoReadOnly != 0 {
		return fmt.Errorf("bookie %s is read-only: it refuses adds", addr)
	}
	return nil
}

// target is the bookie one point runs against.
type target struct {
	addr  string
	local *localBookie // nil for a remote bookie
}

// startTarget starts a fresh in-process bookie in directories of its own,
// or names the remote one.
func (r *runner) startTarget(name string) (*target, error) {
	if r.cfg.Addr != "" {
		return &target{addr: r.cfg.Addr}, nil
	}
	r.points++
	sub := fmt.Sprintf("%02d-%s", r.points, name)
	b, err := startLocal(r.fs, r.cfg.Storage, filepath.Join(r.dirs.journal, sub), filepath.Join(r.dirs.ledger, sub), r.cfg.Logger)
	if err != nil {
		return nil, errors.Join(err, removeAll(filepath.Join(r.dirs.journal, sub), filepath.Join(r.dirs.ledger, sub)))
	}
	return &target{addr: b.addr(), local: b}, nil
}

// close stops an in-process bookie and removes its directories.
func (t *target) close() error {
	if t.local == nil {
		return nil
	}
	err := t.local.stop()
	return errors.Join(err, removeAll(t.local.JournalDir, t.local.LedgerDir))
}

// ledgers allocates n ledger ids unused in this run.
func (r *runner) ledgers(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = r.nextLedger
		r.nextLedger++
	}
	return out
}

func dial(addr string, n int) ([]*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*client.Client
	for range n {
		cl, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

func closeAll(cls []*client.Client) {
	for _, cl := range cls {
		_ = cl.Close() // never fails; requests still pending (after a failure only) end disconnected
	}
}

// point measures adds by n clients of size-byte entries, then cache-hit
// reads of what they wrote, against a fresh bookie; then the disk at the
// group size the adds reached.
func (r *runner) point(n, size int) (err error) {
	t, err := r.startTarget(fmt.Sprintf("c%d-%s", n, perfdisk.SizeName(size)))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.close()) }()
	conns, err := dial(t.addr, n)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	add, ws, err := r.addPoint(conns, size, t.local)
	if err != nil {
		return err
	}
	read, err := r.readPoint(conns, ws, size)
	if err != nil {
		return err
	}
	closeAll(conns)
	if err := t.close(); err != nil { // before the disk is measured: it must be idle
		return err
	}
	if err := r.addDiskLimit(&add); err != nil {
		return err
	}
	r.rep.Adds = append(r.rep.Adds, add)
	r.rep.Reads = append(r.rep.Reads, read)
	fmt.Fprintln(r.progress, FormatPoint(add))
	fmt.Fprintln(r.progress, FormatPoint(read))
	return nil
}

// addPoint runs one writer per connection, each on its own new ledger.
func (r *runner) addPoint(conns []*client.Client, size int, local *localBookie) (Point, []*writer, error) {
	ph := perfkit.NewPhase()
	ws := make([]*writer, len(conns))
	runs := make([]func(), len(conns))
	for i, l := range r.ledgers(len(conns)) {
		ws[i] = newWriter(ph, conns[i], r.pat, l, size, r.cfg.Outstanding, -1)
		runs[i] = ws[i].run
	}
	var c *perfkit.Counters
	if local != nil {
		c = local.Counts
	}
	label := fmt.Sprintf("add  %4d clients %6s", len(conns), perfdisk.SizeName(size))
	w, err := r.measureWindow(ph, label, runs, c)
	if err != nil {
		return Point{}, nil, err
	}
	tallies := make([]*perfkit.Tally, len(ws))
	for i, wr := range ws {
		tallies[i] = wr.tally
	}
	p := r.pointOf("add", len(conns), size, tallies, w.Elapsed)
	if w.Syncs > 0 {
		p.JournalSyncs, p.BytesPerSync = w.Syncs, float64(w.Written)/float64(w.Syncs)
	}
	return p, ws, nil
}

// readPoint reads back what the writers just wrote: each client cycles
// over the most recent entries of its ledger, which the bookie still
// caches (HotBytes in all).
func (r *runner) readPoint(conns []*client.Client, ws []*writer, size int) (Point, error) {
	ph := perfkit.NewPhase()
	perClient := max(1, r.cfg.HotBytes/int64(len(conns)*size))
	var runs []func()
	var tallies []*perfkit.Tally
	window := perClient // reported: the smallest window of any client
	for i, w := range ws {
		n := w.written()
		if n == 0 {
			continue // nothing acknowledged in the whole point: the add row shows it
		}
		own := min(n, perClient)
		window = min(window, own)
		rd := newReader(ph, conns[i], r.pat, w.ledger, size, r.cfg.Outstanding, n-own, n-1, true)
		runs = append(runs, rd.run)
		tallies = append(tallies, rd.tally)
	}
	label := fmt.Sprintf("read %4d clients %6s", len(conns), perfdisk.SizeName(size))
	win, err := r.measureWindow(ph, label, runs, nil)
	if err != nil {
		return Point{}, err
	}
	p := r.pointOf("read", len(conns), size, tallies, win.Elapsed)
	p.ReadWindow = window
	return p, nil
}

// timing is how the run's loads are timed and shown.
func (r *runner) timing() perfkit.Timing {
	return perfkit.Timing{Warmup: r.cfg.Warmup, Duration: r.cfg.Duration, Live: r.cfg.Live, Interval: r.cfg.ProgressInterval}
}

// measureWindow runs the loads through warm-up and the measured window.
func (r *runner) measureWindow(ph *perfkit.Phase, label string, runs []func(), c *perfkit.Counters) (perfkit.Window, error) {
	return perfkit.MeasureWindow(r.timing(), ph, label, runs, c)
}

// measureAll runs loads that end on their own, measuring all of it.
func (r *runner) measureAll(ph *perfkit.Phase, label string, runs []func()) (time.Duration, error) {
	return perfkit.MeasureAll(r.timing(), ph, label, runs)
}

func (r *runner) pointOf(op string, clients, size int, tallies []*perfkit.Tally, elapsed time.Duration) Point {
	rt := perfkit.RatesOf(tallies, size, elapsed)
	return Point{Op: op, Clients: clients, EntrySize: size, Outstanding: r.cfg.Outstanding, Entries: rt.Entries,
		Seconds: rt.Seconds, EntriesPerSec: rt.EntriesPerSec, MiBPerSec: rt.MiBPerSec, LatencyUS: rt.LatencyUS}
}
