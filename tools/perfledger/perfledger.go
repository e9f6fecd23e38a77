// Package perfledger measures the ledger client end to end: appends to
// replicated ledgers on real bookies, through their sockets, as a broker's
// managed ledger drives them. It backs `magnetar perf ledger`.
//
// For every quorum (E, Qw, Qa), entry size and writer count it starts a
// fresh cluster: a shared in-memory metadata store and Bookies bookies in
// this process, each with its own journal and ledger directories on real
// disk, served on loopback TCP and registered like `magnetar bookie`
// registers. A ledger client with the default network transport creates
// one ledger per writer; each writer keeps up to Outstanding appends in
// flight. The add latency is the append call to its callback, which the
// client runs once Qa bookies of the entry's write set stored it and every
// earlier entry completed. After the measured window the ledgers are
// closed, opened again by a second client, and read back: their metadata
// must end at the last acknowledged entry, and every entry read (a sample
// per ledger, or all) must match what was appended byte for byte, or the
// run fails.
//
// The disk's own limit is measured in the same run through perfdisk:
// write+datasync of 1 MiB blocks, one stream, in the run's directory. Each
// point is reported against it as MiB/s x Qw / disk MiB/s: every entry
// reaches Qw journals, each synced before the bookie acknowledges, and all
// bookies share the one disk. That counts payload bytes only; the bytes
// the journals actually wrote in the window (entry headers, record framing
// and block padding included) are counted below them and shown beside it.
// The entry logs write every entry once more, in the background, and are
// not counted.
//
// With Store set the tool starts no bookie: the cluster whose metadata
// Store holds takes the load, and its ledgers are deleted afterwards.
package perfledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// StorageOpener builds the ledger storage opener of an in-process bookie
// (see perfkit.StorageOpener).
type StorageOpener = perfkit.StorageOpener

// Quorum is a ledger's ensemble size, write quorum and ack quorum.
type Quorum struct {
	Ensemble    int `json:"ensemble"`
	WriteQuorum int `json:"write_quorum"`
	AckQuorum   int `json:"ack_quorum"`
}

func (q Quorum) String() string {
	return fmt.Sprintf("%d,%d,%d", q.Ensemble, q.WriteQuorum, q.AckQuorum)
}

func (q Quorum) valid() bool {
	return q.AckQuorum >= 1 && q.WriteQuorum >= q.AckQuorum && q.Ensemble >= q.WriteQuorum
}

// ParseQuorums parses triples "E,Qw,Qa" separated by spaces or
// semicolons, such as "1,1,1 3,2,2 3,3,2".
func ParseQuorums(s string) ([]Quorum, error) {
	var out []Quorum
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ';' || r == '\t' }) {
		f := strings.Split(part, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("quorum %q: want E,Qw,Qa", part)
		}
		var n [3]int
		for i, v := range f {
			x, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("quorum %q: %q is not a number", part, v)
			}
			n[i] = x
		}
		q := Quorum{Ensemble: n[0], WriteQuorum: n[1], AckQuorum: n[2]}
		if !q.valid() || q.Ensemble > maxEnsemble {
			return nil, fmt.Errorf("quorum %q: want %d >= E >= Qw >= Qa >= 1", part, maxEnsemble)
		}
		out = append(out, q)
	}
	if len(out) == 0 {
		return nil, errors.New("no quorums given")
	}
	return out, nil
}

// VerifyAll, as Config.Verify, reads back every entry of every ledger.
const VerifyAll = -1

// Config chooses what to measure.
type Config struct {
	// Store, when set, is a running cluster's metadata store: its
	// registered writable bookies take the load and none is started.
	// Target names it in the report. The caller closes Store.
	Store  metadata.Store
	Target string
	// Bookies is how many bookies to start in-process (without Store).
	Bookies int
	// Dir holds the run's temporary directory (removed afterwards):
	// the bookies' journals and ledgers and the disk measurement's files;
	// default os.TempDir().
	Dir string
	// Backend is the engine io backend (auto, uring, std) of the
	// in-process bookies and of the disk measurement.
	Backend string
	// Storage opens an in-process bookie's ledger storage (required
	// without Store); StorageName names it in the report.
	Storage     StorageOpener
	StorageName string

	Quorums     []Quorum
	Sizes       []int // payload bytes per entry
	Writers     []int // writers per point, each appending to its own ledger
	Outstanding int   // appends in flight per writer
	// Digest is the ledgers' digest type (CRC32C, MAC or DUMMY).
	Digest   ledger.DigestType
	Duration time.Duration
	Warmup   time.Duration // unmeasured load before each point's window
	// Verify is how many entries of each ledger are read back and
	// compared (in runs of consecutive entries, the first and the last
	// included), or VerifyAll.
	Verify int
	// DiskDuration is the time per disk measurement; 0 skips them.
	DiskDuration time.Duration
	// Live, if set, gets a line every ProgressInterval while a point runs.
	Live             io.Writer
	ProgressInterval time.Duration
	// Logger receives the bookies' and the client's logs (default:
	// discarded).
	Logger *slog.Logger
}

// DefaultConfig returns the settings `magnetar perf ledger` uses by default.
func DefaultConfig() Config {
	return Config{
		Bookies:          3,
		Backend:          engine.BackendAuto,
		Quorums:          []Quorum{{1, 1, 1}, {3, 2, 2}, {3, 3, 2}},
		Sizes:            []int{1 << 10, 64 << 10},
		Writers:          []int{1, 4},
		Outstanding:      256,
		Digest:           ledger.DigestCRC32C,
		Duration:         5 * time.Second,
		Warmup:           time.Second,
		Verify:           4096,
		DiskDuration:     time.Second,
		ProgressInterval: time.Second,
	}
}

// Limits of the configuration. Entries fit the bookie's default frame
// (5 MiB + 1 KiB, less the entry's 32-byte header and the request's);
// the bytes a point keeps in flight are bounded so that a bad flag fails
// here rather than exhausting memory (the client holds every pending
// entry, and each bookie a copy until it is journaled).
const (
	minEntrySize   = payloadHeadLen
	maxEntrySize   = 5 << 20
	maxOutstanding = 10000
	maxWriters     = 1024
	maxBookies     = 32
	maxEnsemble    = maxBookies
	maxInFlight    = 1 << 30
)

func (cfg Config) check() error {
	switch {
	case len(cfg.Quorums) == 0 || len(cfg.Sizes) == 0 || len(cfg.Writers) == 0:
		return errors.New("no quorums, entry sizes or writer counts")
	case cfg.Outstanding < 1 || cfg.Outstanding > maxOutstanding:
		return fmt.Errorf("%d outstanding per writer: want 1..%d", cfg.Outstanding, maxOutstanding)
	case cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.DiskDuration < 0:
		return errors.New("duration must be positive; warm-up and disk duration not negative")
	case cfg.Verify < 1 && cfg.Verify != VerifyAll:
		return fmt.Errorf("verify %d entries per ledger: want 1 or more, or all", cfg.Verify)
	case cfg.Store == nil && (cfg.Bookies < 1 || cfg.Bookies > maxBookies):
		return fmt.Errorf("%d bookies: want 1..%d", cfg.Bookies, maxBookies)
	case cfg.Store == nil && cfg.Storage == nil:
		return errors.New("in-process bookies need a ledger storage")
	case cfg.Digest != ledger.DigestCRC32C && cfg.Digest != ledger.DigestMAC && cfg.Digest != ledger.DigestDummy:
		return fmt.Errorf("digest %q: want %s, %s or %s", cfg.Digest, ledger.DigestCRC32C, ledger.DigestMAC, ledger.DigestDummy)
	case cfg.Backend == engine.BackendMem:
		return errors.New("the mem backend has no disk to measure: want auto, uring or std")
	}
	for _, q := range cfg.Quorums {
		if !q.valid() {
			return fmt.Errorf("quorum %s: want E >= Qw >= Qa >= 1", q)
		}
	}
	for _, n := range cfg.Writers {
		if n < 1 || n > maxWriters {
			return fmt.Errorf("%d writers: want 1..%d", n, maxWriters)
		}
	}
	for _, s := range cfg.Sizes {
		if s < minEntrySize || s > maxEntrySize {
			return fmt.Errorf("entry size %d: want %d..%d bytes", s, minEntrySize, maxEntrySize)
		}
		for _, n := range cfg.Writers {
			if int64(s)*int64(n)*int64(cfg.Outstanding) > maxInFlight {
				return fmt.Errorf("%d writers x %d outstanding x %d bytes is over %d MiB in flight", n, cfg.Outstanding, s, maxInFlight>>20)
			}
		}
	}
	return nil
}

// Run measures every point in cfg. The header and each row go to progress
// (if not nil) as they are measured; the notes are only in the report
// (FormatNotes).
func Run(cfg Config, progress io.Writer) (*Report, error) {
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Live == nil {
		cfg.Live = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("perf ledger: %w", err)
	}
	parent := cfg.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("perf ledger: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "magnetar-perfledger-")
	if err != nil {
		return nil, fmt.Errorf("perf ledger: %w", err)
	}
	r, err := newRunner(cfg, tmp, progress)
	if err == nil {
		err = r.run()
		err = errors.Join(err, r.close())
	}
	if rerr := os.RemoveAll(tmp); rerr != nil {
		err = errors.Join(err, fmt.Errorf("removing the benchmark's directory: %w", rerr))
	}
	if err != nil {
		return nil, fmt.Errorf("perf ledger: %w", err)
	}
	return r.rep, nil
}

// writableBookies counts the bookies registered in store that take adds.
func writableBookies(store metadata.Store) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	regs, err := registry.Bookies(ctx, store)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range regs {
		if !b.ReadOnly {
			n++
		}
	}
	return n, nil
}
