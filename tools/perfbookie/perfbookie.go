// Package perfbookie measures a bookie end to end, through its socket, as
// ledger clients drive it. It backs `magnetar perf bookie`.
//
// For every entry size and client count it runs an add point (each client
// is one connection writing its own ledger with a bounded number of adds
// outstanding; add latency is send to acknowledgement) and then a cache-hit
// read point (the same clients read back the entries they just wrote,
// pipelined). A cold catch-up read follows: a backlog is written, the
// in-process bookie is restarted (its caches are empty, and the page cache
// of its files is dropped where the kernel allows), and the backlog is read
// back in order, ledger by ledger. Every entry read is compared with what
// was written: a bookie that returns wrong bytes fails the run.
//
// In the same run, on the journal's directory and io backend, it measures
// the disk's own limits through perfdisk: one datasync's latency,
// write+datasync at the group size each add point reached (counted below
// the journal), and sequential reads from a cold page cache, and reports
// adds and cold reads as fractions of them.
//
// The target is either a bookie the tool starts in-process on real
// directories (served on loopback TCP through bookie.Serve, a fresh bookie
// per point so points do not inherit each other's backlog), or a running
// bookie at an address, where cold reads and group sizes are not measured.
package perfbookie

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/tools/perfkit"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// StorageOpener builds the ledger storage opener of an in-process bookie
// (see perfkit.StorageOpener).
type StorageOpener = perfkit.StorageOpener

// Config chooses what to measure.
type Config struct {
	// Addr is a running bookie (host:port). Empty: start one in-process.
	Addr string
	// Dir holds the in-process bookie's directories (a fresh temporary
	// directory inside it, removed afterwards) unless JournalDir and
	// LedgerDir are given; default os.TempDir().
	Dir string
	// JournalDir and LedgerDir, when set, must be empty or missing: the
	// tool writes there and removes what it wrote. The disk limits are
	// measured on JournalDir.
	JournalDir, LedgerDir string
	// Backend is the engine io backend (auto, uring, std) of the
	// in-process bookie and of the disk measurements.
	Backend string
	// Storage opens the in-process bookie's ledger storage (required
	// unless Addr is set).
	Storage StorageOpener
	// StorageName names the storage in the report.
	StorageName string

	Clients     []int // connections per point, each writing its own ledger
	Sizes       []int // entry data bytes (the 24-byte head included)
	Outstanding int   // adds or reads in flight per client
	Duration    time.Duration
	Warmup      time.Duration // unmeasured load before each point's window
	// HotBytes is how much of what a point wrote its cache-hit reads cover
	// (the most recent entries, split between the clients).
	HotBytes int64
	// BacklogBytes is the cold-read backlog; 0 skips the cold read.
	BacklogBytes     int64
	BacklogEntrySize int
	BacklogLedgers   int
	// DiskDuration is the time per disk measurement; 0 skips them.
	DiskDuration time.Duration
	// Live, if set, gets a line every ProgressInterval while a load runs,
	// and a line before each longer step, so a long run shows where it is.
	Live             io.Writer
	ProgressInterval time.Duration
	// LedgerBase is the first ledger id; 0 derives one from the clock so
	// that runs against the same bookie use distinct ledgers.
	LedgerBase int64
	// Logger receives the in-process bookie's logs (default: discarded).
	Logger *slog.Logger
}

// DefaultConfig returns the settings `magnetar perf bookie` uses by default.
func DefaultConfig() Config {
	return Config{
		Backend:          engine.BackendAuto,
		Clients:          []int{1, 4, 16, 64},
		Sizes:            []int{1 << 10, 64 << 10},
		Outstanding:      64,
		Duration:         5 * time.Second,
		Warmup:           time.Second,
		HotBytes:         64 << 20,
		BacklogBytes:     256 << 20,
		BacklogEntrySize: 64 << 10,
		BacklogLedgers:   4,
		DiskDuration:     time.Second,
		ProgressInterval: time.Second,
	}
}

// Limits of the configuration: entries fit the bookie's default frame
// (5 MiB + 1 KiB, less the request header and master key), and no more
// adds are in flight than the bookie queues (10000 per add worker) before
// it stops reading a connection.
const (
	minEntrySize   = bkproto.EntryHeadLen + 8
	maxEntrySize   = 5 << 20
	maxOutstanding = 10000
	maxClients     = 1024
)

func (cfg Config) check() error {
	switch {
	case len(cfg.Clients) == 0 || len(cfg.Sizes) == 0:
		return errors.New("perf bookie: no client counts or entry sizes")
	case cfg.Outstanding < 1 || cfg.Outstanding > maxOutstanding:
		return fmt.Errorf("perf bookie: %d outstanding per client: want 1..%d", cfg.Outstanding, maxOutstanding)
	case cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.DiskDuration < 0 || cfg.HotBytes < 0 || cfg.BacklogBytes < 0:
		return errors.New("perf bookie: duration must be positive; warm-up, disk duration, hot bytes and backlog not negative")
	case cfg.Addr == "" && cfg.Storage == nil:
		return errors.New("perf bookie: an in-process bookie needs a ledger storage")
	case cfg.Backend == engine.BackendMem:
		return errors.New("perf bookie: the mem backend has no disk to measure: want auto, uring or std")
	case (cfg.JournalDir == "") != (cfg.LedgerDir == ""):
		return errors.New("perf bookie: give both the journal and the ledger directory, or neither")
	}
	for _, n := range cfg.Clients {
		if n < 1 || n > maxClients {
			return fmt.Errorf("perf bookie: %d clients: want 1..%d", n, maxClients)
		}
	}
	sizes := cfg.Sizes
	if cfg.BacklogBytes > 0 {
		if cfg.BacklogLedgers < 1 || cfg.BacklogLedgers > maxClients {
			return fmt.Errorf("perf bookie: %d backlog ledgers: want 1..%d", cfg.BacklogLedgers, maxClients)
		}
		sizes = append([]int{cfg.BacklogEntrySize}, sizes...)
	}
	for _, s := range sizes {
		if s < minEntrySize || s > maxEntrySize {
			return fmt.Errorf("perf bookie: entry size %d: want %d..%d bytes", s, minEntrySize, maxEntrySize)
		}
	}
	return nil
}

// maxSize is the largest entry the run writes.
func (cfg Config) maxSize() int {
	m := 0
	if cfg.BacklogBytes > 0 {
		m = cfg.BacklogEntrySize
	}
	for _, s := range cfg.Sizes {
		m = max(m, s)
	}
	return m
}

// Run measures every point in cfg. The header and each row go to
// progress (if not nil) as they are measured; the notes are only in the
// report (FormatNotes).
func Run(cfg Config, progress io.Writer) (*Report, error) {
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Live == nil {
		cfg.Live = io.Discard
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.LedgerBase == 0 {
		// Milliseconds since 1970 shifted past 65536 ledgers per run: ids
		// stay distinct across runs against one bookie and fit an int64.
		cfg.LedgerBase = time.Now().UnixMilli() << 16
	}
	fs, err := engine.New(engine.Options{Backend: cfg.Backend, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("perf bookie: %w", err)
	}
	defer fs.Close()
	dirs, err := prepareDirs(cfg)
	if err != nil {
		return nil, fmt.Errorf("perf bookie: %w", err)
	}
	r := newRunner(cfg, fs, dirs, progress)
	err = r.run()
	if cerr := dirs.cleanup(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("removing the benchmark's directories: %w", cerr))
	}
	if err != nil {
		return nil, fmt.Errorf("perf bookie: %w", err)
	}
	return r.rep, nil
}

// runDirs are where the in-process bookies and the disk measurements
// write. Everything the run creates lies below them.
type runDirs struct {
	journal, ledger string
	tmp             string // the temporary directory holding both, if the tool made it
}

// prepareDirs makes a fresh temporary directory under cfg.Dir, or checks
// that explicit directories hold nothing the run could destroy.
func prepareDirs(cfg Config) (runDirs, error) {
	if cfg.JournalDir != "" {
		for _, d := range []string{cfg.JournalDir, cfg.LedgerDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return runDirs{}, err
			}
			names, err := os.ReadDir(d)
			if err != nil {
				return runDirs{}, err
			}
			if len(names) > 0 {
				return runDirs{}, fmt.Errorf("%s is not empty: the benchmark writes and removes files there, so it wants an empty directory", d)
			}
		}
		return runDirs{journal: cfg.JournalDir, ledger: cfg.LedgerDir}, nil
	}
	parent := cfg.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return runDirs{}, err
	}
	tmp, err := os.MkdirTemp(parent, "magnetar-perfbookie-")
	if err != nil {
		return runDirs{}, err
	}
	d := runDirs{journal: filepath.Join(tmp, "journal"), ledger: filepath.Join(tmp, "ledgers"), tmp: tmp}
	for _, dir := range []string{d.journal, d.ledger} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return runDirs{}, errors.Join(err, os.RemoveAll(tmp))
		}
	}
	return d, nil
}

// cleanup removes what the run wrote: the temporary directory, or the
// contents of the explicit ones (empty when the run began).
func (d runDirs) cleanup() error {
	if d.tmp != "" {
		return os.RemoveAll(d.tmp)
	}
	var errs []error
	for _, dir := range []string{d.journal, d.ledger} {
		names, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, n := range names {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, n.Name())))
		}
	}
	return errors.Join(errs...)
}
