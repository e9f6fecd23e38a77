package offload

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/ledger"
)

// Contract tests: every driver passes them.

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 1<<20)
	rng.Read(big)
	cases := map[string][][]byte{
		"empty":       nil,
		"one-empty":   {{}},
		"zero-and-1m": {{}, big, []byte("x"), {}, big[:1000]},
		"many-small":  randomPayloads(rng, 250, 300),
	}
	meta := map[string]string{"ManagedLedgerName": "public/default/persistent/t1", "driver": "x", "<&>": "\u2028"}
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o := d.make(t)
			id := int64(0)
			for name, payloads := range cases {
				id++
				k := testKey(id)
				if err := o.Offload(context.Background(), k, meta, newSource(k.LedgerID, payloads)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkCopy(t, o, k, payloads, meta)
			}
			k := testKey(100) // nil meta reads back empty
			if err := o.Offload(context.Background(), k, nil, newSource(k.LedgerID, cases["one-empty"])); err != nil {
				t.Fatal(err)
			}
			checkCopy(t, o, k, cases["one-empty"], map[string]string{})
		})
	}
}

func TestReadRanges(t *testing.T) {
	payloads := randomPayloads(rand.New(rand.NewSource(2)), 12, 40)
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, ctx := d.make(t), context.Background()
			k, empty := testKey(1), testKey(2)
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, payloads)); err != nil {
				t.Fatal(err)
			}
			if err := o.Offload(ctx, empty, nil, newSource(empty.LedgerID, nil)); err != nil {
				t.Fatal(err)
			}
			r := mustOpen(t, o, k)
			defer r.Close()
			for first := int64(0); first < 12; first++ {
				for last := first; last < 12; last++ {
					got, err := r.Read(ctx, first, last)
					if err != nil {
						t.Fatalf("read %d..%d: %v", first, last, err)
					}
					if err := compareEntries(got, k, first, payloads[first:last+1]); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, rg := range [][2]int64{{-1, 3}, {5, 4}, {0, 12}, {12, 12}, {11, 100}} {
				_, err := r.Read(ctx, rg[0], rg[1])
				if !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "0..11") {
					t.Errorf("read %d..%d: %v, want ErrOutOfRange naming 0..11", rg[0], rg[1], err)
				}
			}
			re := mustOpen(t, o, empty)
			defer re.Close()
			if _, err := re.Read(ctx, 0, 0); !errors.Is(err, ErrOutOfRange) {
				t.Errorf("read of an empty copy: %v, want ErrOutOfRange", err)
			}
		})
	}
}

func mustOpen(t testing.TB, o Offloader, k Key) Reader {
	t.Helper()
	r, err := o.Open(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestExistsAndDelete(t *testing.T) {
	one, two := [][]byte{[]byte("first")}, [][]byte{[]byte("second"), {}}
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, ctx, k := d.make(t), context.Background(), testKey(7)
			if err := o.Delete(ctx, k); err != nil {
				t.Fatalf("delete of an absent copy: %v", err)
			}
			if _, err := o.Open(ctx, k); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("open of an absent copy: %v", err)
			}
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, one)); err != nil {
				t.Fatal(err)
			}
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, two)); !errors.Is(err, ErrExists) {
				t.Fatalf("second offload: %v, want ErrExists", err)
			}
			checkCopy(t, o, k, one, nil)
			for i := 0; i < 2; i++ {
				if err := o.Delete(ctx, k); err != nil {
					t.Fatalf("delete %d: %v", i, err)
				}
				if _, err := o.Open(ctx, k); !errors.Is(err, ErrNotFound) {
					t.Fatalf("open after delete: %v", err)
				}
			}
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, two)); err != nil {
				t.Fatalf("offload after delete: %v", err)
			}
			checkCopy(t, o, k, two, nil)
		})
	}
}

func TestSourceFailureLeavesNothing(t *testing.T) {
	payloads := randomPayloads(rand.New(rand.NewSource(3)), 300, 100)
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, ctx, k := d.make(t), context.Background(), testKey(9)
			src := newSource(k.LedgerID, payloads)
			src.failAt = 150
			if err := o.Offload(ctx, k, nil, src); !errors.Is(err, errSource) {
				t.Fatalf("offload with a failing source: %v, want the source's error", err)
			}
			if _, err := o.Open(ctx, k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("open after a failed offload: %v, want ErrNotFound", err)
			}
			if fo, ok := o.(*fsOffloader); ok {
				if names := listDir(t, fo, k); len(names) != 0 {
					t.Fatalf("failed offload left %v", names)
				}
			}
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, payloads)); err != nil {
				t.Fatalf("retry: %v", err)
			}
			checkCopy(t, o, k, payloads, nil)
		})
	}
}

func TestCancelledOffload(t *testing.T) {
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, k := d.make(t), testKey(4)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for _, payloads := range [][][]byte{nil, {[]byte("a")}} {
				err := o.Offload(ctx, k, nil, newSource(k.LedgerID, payloads))
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("offload with a cancelled context: %v", err)
				}
			}
			if _, err := o.Open(context.Background(), k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("open after a cancelled offload: %v", err)
			}
		})
	}
}

// TestBadSource: a Source that skips, repeats or mislabels entries fails
// the Offload instead of making a copy with a gap.
func TestBadSource(t *testing.T) {
	bad := map[string]func(*fakeSource) Source{
		"wrong-ledger": func(s *fakeSource) Source { s.ledgerID++; return s },
		"short-empty":  func(s *fakeSource) Source { return &truncSource{s, 0} },
		"bad-lac":      func(s *fakeSource) Source { return &lacSource{s, -2} },
	}
	for _, d := range drivers() {
		for name, mk := range bad {
			t.Run(d.name+"/"+name, func(t *testing.T) {
				o, k := d.make(t), testKey(5)
				src := mk(newSource(k.LedgerID, [][]byte{[]byte("a"), []byte("b")}))
				if err := o.Offload(context.Background(), k, nil, src); err == nil {
					t.Fatal("offload from a bad source succeeded")
				}
				if _, err := o.Open(context.Background(), k); !errors.Is(err, ErrNotFound) {
					t.Fatalf("open: %v", err)
				}
			})
		}
	}
}

// truncSource returns at most n entries per read.
type truncSource struct {
	*fakeSource
	n int
}

func (s *truncSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	ents, err := s.fakeSource.Read(ctx, first, last)
	return ents[:min(s.n, len(ents))], err
}

type lacSource struct {
	*fakeSource
	lac int64
}

func (s *lacSource) LastAddConfirmed() int64 { return s.lac }

func TestKeyValidation(t *testing.T) {
	bad := []Key{
		{ManagedLedger: "", LedgerID: 1, UID: "a"},
		{ManagedLedger: "/abs/t", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a//b", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a/b/", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a/../b", LedgerID: 1, UID: "a"},
		{ManagedLedger: "..", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a/./b", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a\\b", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a/3-x.ledger", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a/3-x.ledger.tmp/b", LedgerID: 1, UID: "a"},
		{ManagedLedger: "a", LedgerID: -1, UID: "a"},
		{ManagedLedger: "a", LedgerID: 1, UID: ""},
		{ManagedLedger: "a", LedgerID: 1, UID: "a/b"},
		{ManagedLedger: "a", LedgerID: 1, UID: "a.b"},
		{ManagedLedger: "a", LedgerID: 1, UID: strings.Repeat("a", 129)},
	}
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, ctx := d.make(t), context.Background()
			for _, k := range bad {
				if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, nil)); !errors.Is(err, ErrInvalidKey) {
					t.Errorf("offload %q: %v, want ErrInvalidKey", k, err)
				}
				if _, err := o.Open(ctx, k); !errors.Is(err, ErrInvalidKey) {
					t.Errorf("open %q: %v, want ErrInvalidKey", k, err)
				}
				if err := o.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
					t.Errorf("delete %q: %v, want ErrInvalidKey", k, err)
				}
			}
			// Names Pulsar makes: dots, colons, percent signs are fine.
			k := Key{ManagedLedger: "my-tenant/ns.1/persistent/t%3Ax-partition-0.ledger-ish", LedgerID: 0, UID: "0-A-f"}
			if err := o.Offload(ctx, k, nil, newSource(0, [][]byte{[]byte("p")})); err != nil {
				t.Fatal(err)
			}
			checkCopy(t, o, k, [][]byte{[]byte("p")}, nil)
		})
	}
}

func TestReaderCloseAndConcurrentReads(t *testing.T) {
	payloads := randomPayloads(rand.New(rand.NewSource(4)), 500, 2000)
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, ctx, k := d.make(t), context.Background(), testKey(11)
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, payloads)); err != nil {
				t.Fatal(err)
			}
			r := mustOpen(t, o, k)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(seed int64) {
					defer wg.Done()
					rng := rand.New(rand.NewSource(seed))
					for i := 0; i < 50; i++ {
						first := rng.Int63n(500)
						last := first + rng.Int63n(500-first)
						got, err := r.Read(ctx, first, last)
						if err == nil {
							err = compareEntries(got, k, first, payloads[first:last+1])
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}(int64(g))
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("second close: %v", err)
			}
			if _, err := r.Read(ctx, 0, 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("read after close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestPayloadsAreCallers: changing a payload Read returned changes neither
// the copy nor the neighbouring payload.
func TestPayloadsAreCallers(t *testing.T) {
	payloads := [][]byte{[]byte("aaaa"), []byte("bbbb")}
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, ctx, k := d.make(t), context.Background(), testKey(12)
			if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, payloads)); err != nil {
				t.Fatal(err)
			}
			r := mustOpen(t, o, k)
			defer r.Close()
			got, err := r.Read(ctx, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			_ = append(got[0].Payload, 'X')
			got[1].Payload[0] = 'Y'
			if !bytes.Equal(got[0].Payload, payloads[0]) {
				t.Fatal("append to one payload changed it")
			}
			checkCopy(t, o, k, payloads, nil)
		})
	}
}

func TestMetaTooLarge(t *testing.T) {
	meta := map[string]string{"big": strings.Repeat("x", MaxMetaSize)}
	for _, d := range drivers() {
		t.Run(d.name, func(t *testing.T) {
			o, k := d.make(t), testKey(13)
			if err := o.Offload(context.Background(), k, meta, newSource(k.LedgerID, nil)); err == nil {
				t.Fatal("offload with oversized meta succeeded")
			}
		})
	}
}
