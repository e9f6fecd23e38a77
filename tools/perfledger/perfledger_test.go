package perfledger

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// memoryStorage gives each bookie an in-memory ledger storage (its
// journal is still on disk), wrapped by wrap if set.
func memoryStorage(wrap func(entrylog.Storage) entrylog.Storage) StorageOpener {
	return func(engine.FS, []string) bookie.OpenStorage {
		return func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
			var st entrylog.Storage = entrylog.NewMemory(cp)
			if wrap != nil {
				st = wrap(st)
			}
			return st, nil
		}
	}
}

// shortConfig is a run of a few hundred milliseconds per point on two
// bookies: quorums 1,1,1 and 2,2,2 with 1 KiB entries, and 3,2,2, which
// needs a third bookie and must be skipped.
func shortConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.Dir, cfg.Backend, cfg.Bookies = t.TempDir(), engine.BackendStd, 2
	cfg.Storage, cfg.StorageName = memoryStorage(nil), "memory"
	cfg.Quorums = []Quorum{{1, 1, 1}, {2, 2, 2}, {3, 2, 2}}
	cfg.Sizes, cfg.Writers, cfg.Outstanding = []int{1 << 10}, []int{1}, 32
	cfg.Duration, cfg.Warmup, cfg.DiskDuration, cfg.ProgressInterval = 300*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond, 100*time.Millisecond
	cfg.Verify = VerifyAll
	return cfg
}

func checkPoint(t *testing.T, p Point) {
	t.Helper()
	l := p.LatencyUS
	switch {
	case p.Entries <= 0 || p.EntriesPerSec <= 0 || p.MiBPerSec <= 0:
		t.Fatalf("no throughput: %+v", p)
	case l.P50 <= 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.P999 || l.P999 > l.P9999 || l.P9999 > l.Max:
		t.Fatalf("percentiles out of order: %+v", l)
	case p.Appended < p.Entries || p.Verified <= 0:
		t.Fatalf("%d appended, %d in the window, %d verified", p.Appended, p.Entries, p.Verified)
	case p.EnsembleChanges != 0:
		t.Fatalf("%d ensemble changes in a clean run", p.EnsembleChanges)
	}
}

func TestRunShort(t *testing.T) {
	cfg := shortConfig(t)
	var live, rows bytes.Buffer
	cfg.Live = &live
	rep, err := Run(cfg, &rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 2 || rep.Points[0].Quorum != (Quorum{1, 1, 1}) || rep.Points[1].Quorum != (Quorum{2, 2, 2}) {
		t.Fatalf("points %+v", rep.Points)
	}
	for _, p := range rep.Points {
		checkPoint(t, p)
		// Every entry was read back (VerifyAll), and the journals wrote.
		if p.Verified != p.Appended || p.JournalMiBPerSec <= 0 || p.JournalSyncs <= 0 || p.DiskFraction <= 0 {
			t.Fatalf("point %+v", p)
		}
	}
	if rep.Disk == nil || rep.Disk.WriteSync.MiBPerSec <= 0 || rep.Bookies != 2 || rep.Target != "in-process" || rep.Verify != "all" {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "quorum 3,2,2 skipped") {
		t.Fatalf("notes %q", rep.Notes)
	}
	for _, want := range []string{"ledger client -> 2 bookies in-process (memory storage)", "E,Qw,Qa writers", "1,1,1         1   1KiB", "2,2,2         1   1KiB"} {
		if !strings.Contains(rows.String(), want) {
			t.Fatalf("no %q in the rows:\n%s", want, rows.String())
		}
	}
	if !strings.Contains(live.String(), "measuring") || !strings.Contains(live.String(), "reading back") {
		t.Fatalf("live lines:\n%s", live.String())
	}
}

// corruptStorage flips the last byte of entry 0 of every ledger when it is
// read, as a bookie returning wrong data would.
type corruptStorage struct{ entrylog.Storage }

func (c corruptStorage) ReadEntry(ledgerID, entryID int64) ([]byte, error) {
	data, err := c.Storage.ReadEntry(ledgerID, entryID)
	if err != nil || entryID != 0 {
		return data, err
	}
	out := bytes.Clone(data)
	out[len(out)-1] ^= 0x40
	return out, nil
}

// A benchmark that reads back wrong data must fail: with a digest the
// client refuses the entry; without one the payload check finds it.
func TestWrongDataFails(t *testing.T) {
	for _, tc := range []struct {
		digest ledger.DigestType
		want   string
	}{
		{ledger.DigestCRC32C, "digest mismatch"},
		{ledger.DigestDummy, "read bytes differ from those appended"},
	} {
		t.Run(string(tc.digest), func(t *testing.T) {
			cfg := shortConfig(t)
			cfg.Quorums, cfg.Digest, cfg.DiskDuration, cfg.Verify = []Quorum{{1, 1, 1}}, tc.digest, 0, 100
			cfg.Duration = 100 * time.Millisecond
			cfg.Storage = memoryStorage(func(st entrylog.Storage) entrylog.Storage { return corruptStorage{st} })
			_, err := Run(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

// With a metadata store given, the run uses the bookies registered there,
// starts none, and deletes its ledgers.
func TestRunningCluster(t *testing.T) {
	cl, err := startCluster(2, t.TempDir(), engine.BackendStd, memoryStorage(nil), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cl.close(); err != nil {
			t.Error(err)
		}
	}()
	store := cl.session()
	cfg := shortConfig(t)
	cfg.Store, cfg.Target, cfg.Storage, cfg.Bookies = store, "memory:", nil, 0
	cfg.Quorums, cfg.DiskDuration, cfg.Verify = []Quorum{{2, 2, 1}, {3, 3, 3}}, 0, 50
	rep, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Target != "memory:" || rep.Bookies != 2 || len(rep.Points) != 1 {
		t.Fatalf("report %+v", rep)
	}
	p := rep.Points[0]
	checkPoint(t, p)
	// A sample: two runs of consecutive entries at least (the first and
	// the last), no journal counts from bookies the tool did not start.
	if p.Verified > p.Appended || p.Verified < 2 || p.JournalMiBPerSec != 0 {
		t.Fatalf("point %+v", p)
	}
	if n := countLedgers(t, store, ledger.LedgersPath+"/L"); n != 0 {
		t.Fatalf("%d benchmark ledgers left in the store", n)
	}
}

// countLedgers counts ledger metadata nodes below path.
func countLedgers(t *testing.T, store metadata.Store, path string) int {
	names, err := store.Children(context.Background(), path)
	if errors.Is(err, metadata.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, "L") && len(name) == 20 {
			n++
			continue
		}
		n += countLedgers(t, store, path+"/"+name)
	}
	return n
}

func TestSampleSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.Int64N(5000)
		sample := 1 + rng.IntN(600)
		if rng.IntN(10) == 0 {
			sample = VerifyAll
		}
		spans := sampleSpans(n, sample, rng)
		var total int64
		for i, s := range spans {
			if s.first > s.last || s.first < 0 || s.last >= n || (i > 0 && s.first <= spans[i-1].last) {
				t.Fatalf("n %d sample %d: spans %v", n, sample, spans)
			}
			total += s.last - s.first + 1
		}
		all := sample == VerifyAll || int64(sample) >= n
		switch {
		case spans[0].first != 0 || spans[len(spans)-1].last != n-1:
			t.Fatalf("n %d sample %d: first or last entry not read: %v", n, sample, spans)
		case all && total != n:
			t.Fatalf("n %d sample %d: %d entries read of all", n, sample, total)
		case !all && (total > int64(max(sample+sampleRun, 2)) || total < int64(min(sample, 2))):
			t.Fatalf("n %d sample %d: %d entries read", n, sample, total)
		}
	}
}

func TestParseQuorums(t *testing.T) {
	q, err := ParseQuorums(" 1,1,1 3,2,2;3,3,2 ")
	if err != nil || len(q) != 3 || q[1] != (Quorum{3, 2, 2}) || q[2].String() != "3,3,2" {
		t.Fatalf("%v %v", q, err)
	}
	for _, bad := range []string{"", "1,1", "2,3,1", "3,2,3", "3,2,0", "x,1,1", "33,1,1"} {
		if _, err := ParseQuorums(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestPatternCheck(t *testing.T) {
	p := newPattern(4096)
	buf := make([]byte, 4096)
	p.fill(buf, 7, 42)
	if err := p.check(buf, 7, 42, 4096); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ledger, entry int64
		size          int
		edit          func([]byte) []byte
		want          string
	}{
		{7, 43, 4096, nil, "payload of ledger 7 entry 42"},
		{8, 42, 4096, nil, "payload of ledger 7 entry 42"},
		{7, 42, 4095, nil, "read 4096 bytes, appended 4095"},
		{7, 42, 4096, func(b []byte) []byte { b[1000] ^= 1; return b }, "differ from those appended at offset 1000"},
	} {
		b := bytes.Clone(buf)
		if tc.edit != nil {
			b = tc.edit(b)
		}
		if err := p.check(b, tc.ledger, tc.entry, tc.size); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v", tc, err)
		}
	}
}

func TestConfigLimits(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"outstanding": func(c *Config) { c.Outstanding = 0 },
		"writers":     func(c *Config) { c.Writers = []int{0} },
		"size":        func(c *Config) { c.Sizes = []int{8} },
		"in flight":   func(c *Config) { c.Sizes, c.Writers, c.Outstanding = []int{4 << 20}, []int{64}, 256 },
		"verify":      func(c *Config) { c.Verify = 0 },
		"digest":      func(c *Config) { c.Digest = "SHA1" },
		"bookies":     func(c *Config) { c.Bookies = 0 },
		"mem backend": func(c *Config) { c.Backend = engine.BackendMem },
	} {
		cfg := shortConfig(t)
		edit(&cfg)
		if _, err := Run(cfg, nil); err == nil {
			t.Fatalf("%s: a bad config ran", name)
		}
	}
}
