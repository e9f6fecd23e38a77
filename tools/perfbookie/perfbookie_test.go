package perfbookie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// shelf stands in for a ledger disk: an in-memory storage closed by a
// bookie is copied here, and the bookie's next start begins from a copy of
// it, as a restarted bookie finds its entries on disk.
type shelf struct {
	mu   sync.Mutex
	disk *entrylog.Memory // nil until a storage closed
}

// keptMemory gives every bookie the run starts a shelf of its own.
func keptMemory(wrap func(entrylog.Storage) entrylog.Storage) StorageOpener {
	return func(engine.FS, []string) bookie.OpenStorage { return (&shelf{}).open(wrap) }
}

func (s *shelf) open(wrap func(entrylog.Storage) entrylog.Storage) bookie.OpenStorage {
	return func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		m := entrylog.NewMemory(cp)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.disk != nil {
			if err := copyStorage(m, s.disk); err != nil {
				return nil, err
			}
		}
		var st entrylog.Storage = &shelved{Memory: m, s: s}
		if wrap != nil {
			st = wrap(st)
		}
		return st, nil
	}
}

type shelved struct {
	*entrylog.Memory
	s *shelf
}

func (st *shelved) Close() error {
	disk := entrylog.NewMemory(nil)
	err := copyStorage(disk, st.Memory)
	st.s.mu.Lock()
	st.s.disk = disk
	st.s.mu.Unlock()
	return errors.Join(err, st.Memory.Close())
}

// copyStorage copies every ledger's key, entries and fence of src to dst.
func copyStorage(dst, src entrylog.Storage) error {
	var ids []int64
	if err := src.Ledgers(func(id int64) bool { ids = append(ids, id); return true }); err != nil {
		return err
	}
	for _, id := range ids {
		key, err := src.MasterKey(id)
		if err != nil {
			return err
		}
		if err := dst.SetMasterKey(id, key); err != nil {
			return err
		}
		last, err := src.LastEntryID(id)
		if errors.Is(err, entrylog.ErrNoEntry) {
			last = -1
		} else if err != nil {
			return err
		}
		for e := int64(0); e <= last; e++ {
			data, err := src.ReadEntry(id, e)
			if errors.Is(err, entrylog.ErrNoEntry) {
				continue
			}
			if err != nil {
				return err
			}
			if err := dst.AddEntry(id, e, data); err != nil {
				return err
			}
		}
		if fenced, err := src.IsFenced(id); err != nil {
			return err
		} else if fenced {
			if _, err := dst.SetFenced(id); err != nil {
				return err
			}
		}
	}
	return nil
}

func smallConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Backend = engine.BackendStd
	cfg.Storage, cfg.StorageName = keptMemory(nil), "test memory"
	cfg.Clients, cfg.Sizes, cfg.Outstanding = []int{1, 2}, []int{1 << 10}, 16
	cfg.Duration, cfg.Warmup = 300*time.Millisecond, 50*time.Millisecond
	cfg.HotBytes = 64 << 10
	cfg.BacklogBytes, cfg.BacklogEntrySize, cfg.BacklogLedgers = 512<<10, 4<<10, 2
	cfg.DiskDuration = 50 * time.Millisecond
	cfg.ProgressInterval = 100 * time.Millisecond
	return cfg
}

func TestPerfBookieInProcess(t *testing.T) {
	cfg := smallConfig(t)
	var progress bytes.Buffer
	cfg.Live = &progress // written by the same goroutine as progress, or while it waits
	rep, err := Run(cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Adds) != 2 || len(rep.Reads) != 2 {
		t.Fatalf("%d add and %d read points, want 2 and 2", len(rep.Adds), len(rep.Reads))
	}
	for i, p := range rep.Adds {
		checkPoint(t, p, "add", cfg.Clients[i])
		if p.JournalSyncs <= 0 || p.BytesPerSync <= 0 || p.Disk == nil || p.DiskBlock%diskBlockUnit != 0 || p.DiskFraction <= 0 {
			t.Fatalf("group size or disk limit missing: %+v", p)
		}
	}
	for i, p := range rep.Reads {
		checkPoint(t, p, "read", cfg.Clients[i])
		if p.ReadWindow < 1 || p.ReadWindow > cfg.HotBytes/int64(p.Clients*p.EntrySize) {
			t.Fatalf("read window %d entries", p.ReadWindow)
		}
	}
	c := rep.Cold
	if c == nil {
		t.Fatalf("no cold read; notes %q", rep.Notes)
	}
	want := cfg.BacklogBytes / int64(cfg.BacklogEntrySize)
	if c.Entries != want || c.Read.Entries != want || c.Bytes != cfg.BacklogBytes || c.WriteMiBPerSec <= 0 {
		t.Fatalf("cold read of %d entries (%d read), want %d: %+v", c.Entries, c.Read.Entries, want, c)
	}
	checkPoint(t, c.Read, "read", cfg.BacklogLedgers)
	if !c.PageCacheDropped || c.DiskFraction <= 0 {
		t.Fatalf("cold read: %+v", c)
	}
	if d := rep.Disk; d == nil || perfkit.Lat(d.Datasync).P50 <= 0 || d.SeqRead.MiBPerSec <= 0 {
		t.Fatalf("disk limits: %+v", rep.Disk)
	}
	var out bytes.Buffer
	Format(&out, rep)
	t.Logf("progress:\n%s\nreport:\n%s", progress.String(), out.String())
	for _, s := range []string{"bookie in-process (test memory storage", "disk: one datasync", "add        2   1KiB",
		"cache hits: last", "cold read: 2 ledgers x 64 entries of 4KiB (512KiB)", "evicted from the page cache"} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("no %q in:\n%s", s, out.String())
		}
	}
	if !strings.Contains(progress.String(), "measuring") || !strings.Contains(progress.String(), "read       1   1KiB") {
		t.Fatalf("no live lines or rows in progress:\n%s", progress.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(cfg.Dir); len(left) != 0 {
		t.Fatalf("the run left %v in %s", left, cfg.Dir)
	}
}

// checkPoint asserts a point measured something and its figures agree.
func checkPoint(t *testing.T, p Point, op string, clients int) {
	t.Helper()
	l := p.LatencyUS
	switch {
	case p.Op != op || p.Clients != clients:
		t.Fatalf("point %s with %d clients, want %s with %d", p.Op, p.Clients, op, clients)
	case p.Entries <= 0 || p.Seconds <= 0 || p.EntriesPerSec <= 0 || p.MiBPerSec <= 0:
		t.Fatalf("no throughput: %+v", p)
	case l.P50 <= 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.P999 || l.P999 > l.P9999 || l.P9999 > l.Max:
		t.Fatalf("latencies out of order: %+v", l)
	}
}

// corrupting returns storage that changes what ReadEntry returns for
// entries with ids >= 2 (so every read window and backlog sees one).
func corrupting(change func(st entrylog.Storage, ledgerID, entryID int64, data []byte) []byte) func(entrylog.Storage) entrylog.Storage {
	return func(st entrylog.Storage) entrylog.Storage { return &corruptStorage{Storage: st, change: change} }
}

type corruptStorage struct {
	entrylog.Storage
	change func(st entrylog.Storage, ledgerID, entryID int64, data []byte) []byte
}

func (c *corruptStorage) ReadEntry(ledgerID, entryID int64) ([]byte, error) {
	data, err := c.Storage.ReadEntry(ledgerID, entryID)
	if err != nil || entryID < 2 {
		return data, err
	}
	return c.change(c.Storage, ledgerID, entryID, data), nil
}

// TestPerfBookieWrongBytesFail: a bookie that returns anything but the
// bytes written fails the benchmark, in the cache-hit and the cold reads.
func TestPerfBookieWrongBytesFail(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(st entrylog.Storage, ledgerID, entryID int64, data []byte) []byte
		want   string
	}{
		"flipped byte": {func(_ entrylog.Storage, _, _ int64, data []byte) []byte {
			out := append([]byte(nil), data...)
			out[len(out)-1] ^= 1
			return out
		}, "read bytes differ from those written"},
		"other entry": {func(st entrylog.Storage, ledgerID, entryID int64, data []byte) []byte {
			prev, err := st.ReadEntry(ledgerID, entryID-1)
			if err != nil {
				return nil
			}
			return prev
		}, "read back the head of ledger"},
		"truncated": {func(_ entrylog.Storage, _, _ int64, data []byte) []byte {
			return data[:len(data)-1]
		}, "bytes, wrote"},
	} {
		for _, cold := range []bool{false, true} {
			cfg := smallConfig(t)
			cfg.Clients, cfg.DiskDuration, cfg.BacklogBytes = []int{1}, 0, 0
			cfg.Duration, cfg.Warmup = 100*time.Millisecond, 0
			cfg.Storage = keptMemory(corrupting(tc.change))
			if cold {
				// Only the cold read's bookie corrupts, and only once restarted.
				cfg.BacklogBytes = 64 << 10
				cfg.Storage = func(_ engine.FS, dirs []string) bookie.OpenStorage {
					s := &shelf{}
					good, bad := s.open(nil), s.open(corrupting(tc.change))
					if !strings.HasSuffix(dirs[0], "-cold") {
						return good
					}
					opened := 0
					return func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
						if opened++; opened > 1 {
							return bad(cp)
						}
						return good(cp)
					}
				}
			}
			_, err := Run(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s (cold %v): got %v, want an error with %q", name, cold, err, tc.want)
			}
			if cold && !strings.Contains(err.Error(), "cold read") {
				t.Fatalf("%s: failed before the cold read: %v", name, err)
			}
		}
	}
}

// TestPerfBookieRemote runs against a bookie at an address: no cold read,
// no group sizes, and the disk limit at 1 MiB blocks.
func TestPerfBookieRemote(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	core, err := bookie.OpenCore(engine.NewMem(), []string{"/journal"}, journal.Options{Logger: log},
		func(cp entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(cp), nil },
		bookie.Options{LedgerDirs: []string{"/"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 40, 2 << 40, nil }, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bookie.Serve(core, bookie.ServerOptions{Addr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(errors.Join(err, core.Close()))
	}
	t.Cleanup(func() {
		if err := errors.Join(srv.Close(context.Background()), core.Close()); err != nil {
			t.Error(err)
		}
	})
	cfg := smallConfig(t)
	cfg.Addr, cfg.Storage, cfg.Clients = srv.Addr(), nil, []int{2}
	cfg.Duration, cfg.Warmup = 200*time.Millisecond, 0
	rep, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Target != srv.Addr() || len(rep.Adds) != 1 || rep.Cold != nil || rep.Adds[0].DiskBlock != 1<<20 || rep.Adds[0].JournalSyncs != 0 {
		t.Fatalf("report %+v", rep)
	}
	checkPoint(t, rep.Adds[0], "add", 2)
	checkPoint(t, rep.Reads[0], "read", 2)
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "cold read not measured") {
		t.Fatalf("notes %q", rep.Notes)
	}
}

func TestPerfBookieConfigRejects(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"no clients":       func(c *Config) { c.Clients = nil },
		"zero clients":     func(c *Config) { c.Clients = []int{0} },
		"tiny entry":       func(c *Config) { c.Sizes = []int{8} },
		"huge entry":       func(c *Config) { c.Sizes = []int{6 << 20} },
		"outstanding":      func(c *Config) { c.Outstanding = 0 },
		"no storage":       func(c *Config) { c.Storage = nil },
		"mem backend":      func(c *Config) { c.Backend = engine.BackendMem },
		"one dir":          func(c *Config) { c.JournalDir = t.TempDir() },
		"backlog ledgers":  func(c *Config) { c.BacklogLedgers = 0 },
		"negative warm-up": func(c *Config) { c.Warmup = -time.Second },
	} {
		cfg := smallConfig(t)
		mod(&cfg)
		if _, err := Run(cfg, nil); err == nil || !strings.HasPrefix(err.Error(), "perf bookie:") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestPerfBookieExplicitDirs: given directories must be empty, and are
// left empty.
func TestPerfBookieExplicitDirs(t *testing.T) {
	cfg := smallConfig(t)
	cfg.JournalDir, cfg.LedgerDir = filepath.Join(t.TempDir(), "j"), filepath.Join(t.TempDir(), "l")
	if err := os.MkdirAll(cfg.LedgerDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(cfg.LedgerDir, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(cfg, nil); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("got %v, want a refusal of the non-empty directory", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keep); err != nil {
		t.Fatal(err)
	}
	cfg.Clients, cfg.DiskDuration, cfg.BacklogBytes = []int{1}, 0, 0
	cfg.Duration, cfg.Warmup = 100*time.Millisecond, 0
	rep, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.JournalDir != cfg.JournalDir || len(rep.Adds) != 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, d := range []string{cfg.JournalDir, cfg.LedgerDir} {
		if left, err := os.ReadDir(d); err != nil || len(left) != 0 {
			t.Fatalf("%s holds %v (%v)", d, left, err)
		}
	}
}

func TestPatternCheck(t *testing.T) {
	p := newPattern(4096)
	buf := make([]byte, 100)
	p.fill(buf, 7, 3, 2)
	if err := p.check(buf, 7, 3, 100); err != nil {
		t.Fatal(err)
	}
	other := make([]byte, 100)
	p.fill(other, 7, 4, 2)
	if bytes.Equal(buf[24:], other[24:]) {
		t.Fatal("consecutive entries have the same body")
	}
	for name, tc := range map[string]struct {
		data          []byte
		ledger, entry int64
	}{
		"other entry":  {other, 7, 3},
		"other ledger": {buf, 8, 3},
		"short":        {buf[:99], 7, 3},
		"lac too high": {func() []byte { b := make([]byte, 100); p.fill(b, 7, 3, 3); return b }(), 7, 3},
		"body":         {func() []byte { b := append([]byte(nil), buf...); b[50]++; return b }(), 7, 3},
	} {
		if err := p.check(tc.data, tc.ledger, tc.entry, 100); err == nil {
			t.Fatalf("%s: check passed", name)
		}
	}
}
