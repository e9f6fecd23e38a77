package offload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"math/rand"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
)

var errSource = errors.New("test: source failed")

// fakeSource is a closed ledger in memory. It can fail the read that
// reaches entry failAt, and records the ranges it was asked for.
type fakeSource struct {
	ledgerID int64
	payloads [][]byte
	failAt   int64 // -1: never

	mu     sync.Mutex
	ranges [][2]int64
}

func newSource(ledgerID int64, payloads [][]byte) *fakeSource {
	return &fakeSource{ledgerID: ledgerID, payloads: payloads, failAt: -1}
}

func (s *fakeSource) LastAddConfirmed() int64 { return int64(len(s.payloads)) - 1 }

func (s *fakeSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	s.mu.Lock()
	s.ranges = append(s.ranges, [2]int64{first, last})
	s.mu.Unlock()
	if first < 0 || last < first || last >= int64(len(s.payloads)) {
		return nil, fmt.Errorf("fake source: bad range %d..%d", first, last)
	}
	if s.failAt >= first && s.failAt <= last {
		return nil, errSource
	}
	out := make([]ledger.Entry, 0, last-first+1)
	for i := first; i <= last; i++ {
		out = append(out, ledger.Entry{LedgerID: s.ledgerID, EntryID: i, LAC: last, Payload: s.payloads[i]})
	}
	return out, nil
}

// randomPayloads returns n payloads of 0..maxSize bytes.
func randomPayloads(rng *rand.Rand, n, maxSize int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, rng.Intn(maxSize+1))
		rng.Read(out[i])
	}
	return out
}

// driverCase makes a fresh offloader of one driver.
type driverCase struct {
	name string
	make func(t *testing.T) Offloader
}

// drivers are the implementations every contract test runs against:
// filesystem on the mem engine and on the real disk, and memory.
func drivers() []driverCase {
	return []driverCase{
		{"filesystem-mem", func(t *testing.T) Offloader { o, _ := newMemFS(t, Config{}); return o }},
		{"filesystem-disk", func(t *testing.T) Offloader {
			o, err := New(DriverFilesystem, Config{Root: "file://" + t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return o
		}},
		{"memory", func(*testing.T) Offloader { return NewMemory() }},
	}
}

const memRoot = "/offload"

// newMemFS returns a filesystem offloader on a fresh mem engine.
func newMemFS(t testing.TB, cfg Config) (*fsOffloader, *engine.MemFS) {
	mem := engine.NewMem()
	cfg.FS, cfg.Root = mem, memRoot
	o, err := newFilesystem(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o, mem
}

func testKey(id int64) Key {
	return Key{ManagedLedger: "public/default/persistent/t1", LedgerID: id, UID: fmt.Sprintf("u%d-ab12", id)}
}

// checkCopy opens k and checks that it holds exactly payloads and meta.
func checkCopy(t testing.TB, o Offloader, k Key, payloads [][]byte, meta map[string]string) {
	t.Helper()
	r, err := o.Open(context.Background(), k)
	if err != nil {
		t.Fatalf("open %v: %v", k, err)
	}
	defer r.Close()
	if err := compareReader(r, k, payloads, meta); err != nil {
		t.Fatal(err)
	}
}

// compareReader reads all of r and compares it with payloads and meta.
func compareReader(r Reader, k Key, payloads [][]byte, meta map[string]string) error {
	total := int64(0)
	for _, p := range payloads {
		total += int64(len(p))
	}
	if r.LastEntryID() != int64(len(payloads))-1 || r.Length() != total {
		return fmt.Errorf("%v: last entry %d length %d, want %d and %d", k, r.LastEntryID(), r.Length(), len(payloads)-1, total)
	}
	if m, ok := r.(MetaReader); ok && !maps.Equal(m.Meta(), meta) && !(len(meta) == 0 && len(m.Meta()) == 0) {
		return fmt.Errorf("%v: meta %v, want %v", k, m.Meta(), meta)
	}
	if len(payloads) == 0 {
		return nil
	}
	got, err := r.Read(context.Background(), 0, r.LastEntryID())
	if err != nil {
		return err
	}
	return compareEntries(got, k, 0, payloads)
}

// compareEntries checks that got are entries first.. of k with payloads.
func compareEntries(got []ledger.Entry, k Key, first int64, payloads [][]byte) error {
	if len(got) != len(payloads) {
		return fmt.Errorf("%v: got %d entries, want %d", k, len(got), len(payloads))
	}
	for i, e := range got {
		if e.LedgerID != k.LedgerID || e.EntryID != first+int64(i) || !bytes.Equal(e.Payload, payloads[i]) {
			return fmt.Errorf("%v: entry %d is ledger %d entry %d with %d bytes, want entry %d with %d bytes",
				k, i, e.LedgerID, e.EntryID, len(e.Payload), first+int64(i), len(payloads[i]))
		}
	}
	return nil
}

// encodeCopy returns the file the filesystem driver writes for a copy, made
// from the same encoders (the fuzz test's oracle).
func encodeCopy(ledgerID int64, meta map[string]string, payloads [][]byte) []byte {
	metaJSON, err := encodeMeta(meta)
	if err != nil {
		panic(err)
	}
	b := encodeHeader(ledgerID, metaJSON)
	offsets := make([]uint64, 0, len(payloads))
	total := uint64(0)
	for i, p := range payloads {
		offsets = append(offsets, uint64(len(b)))
		h := make([]byte, recordHeaderSize)
		putRecordHeader(h, int64(i), p)
		b = append(append(b, h...), p...)
		total += uint64(len(p))
	}
	return append(b, encodeTrailer(ledgerID, offsets, uint64(len(b)), total)...)
}

// writeFile stores data as k's copy on mem, as if Offload had written it.
func writeFile(t testing.TB, o *fsOffloader, mem engine.FS, k Key, data []byte) {
	t.Helper()
	dir, final, _ := o.paths(k)
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteFileAtomic(mem, final, data); err != nil {
		t.Fatal(err)
	}
}

// listDir returns the names in k's directory (none if it is absent).
func listDir(t testing.TB, o *fsOffloader, k Key) []string {
	t.Helper()
	dir, _, _ := o.paths(k)
	names, err := o.fs.List(dir)
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal(err)
	}
	return names
}
