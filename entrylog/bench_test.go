package entrylog

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// The benchmarks run on the std backend in a temporary directory (real
// files, real datasyncs), with BookKeeper's default sizes, and report MB/s
// of payload.

const benchEntry = 1 << 10

func benchOpen(b *testing.B, dir string, opts Options) *DB {
	b.Helper()
	opts.Logger = testLogger()
	opts.IndexFS = vfs.Default
	db, err := Open(engine.NewStd(), []string{dir}, opts)
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkAddEntry adds 1 KiB entries to 100 ledgers round-robin; the
// write cache is flushed in the background (and every second), so this is
// the rate the storage sustains, flushes included.
func BenchmarkAddEntry(b *testing.B) {
	db := benchOpen(b, b.TempDir(), Options{LogSizeLimit: 256 << 20})
	data := make([]byte, benchEntry)
	b.SetBytes(benchEntry)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := db.AddEntry(int64(i%100), int64(i/100), data); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// benchFill writes n 1 KiB entries of ledger 1 and flushes them.
func benchFill(b *testing.B, db *DB, n int) {
	b.Helper()
	data := make([]byte, benchEntry)
	for e := 0; e < n; e++ {
		if err := db.AddEntry(1, int64(e), data); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReadEntryCached reads entries the read cache holds.
func BenchmarkReadEntryCached(b *testing.B) {
	const n = 10000
	db := benchOpen(b, b.TempDir(), Options{})
	defer db.Close()
	benchFill(b, db, n)
	for e := 0; e < n; e++ { // read once: the entries come into the cache
		if _, err := db.ReadEntry(1, int64(e)); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(benchEntry)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.ReadEntry(1, int64(rng.IntN(n))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadEntryCold reads entries in random order from the entry log
// through the index, with no read cache (so no read-ahead helps): an index
// lookup, a pinned read and a checksum per entry. The OS page cache is
// warm; the disk itself is not measured.
func BenchmarkReadEntryCold(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	db := benchOpen(b, dir, Options{})
	benchFill(b, db, n)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	db = benchOpen(b, dir, Options{ReadCacheMaxSize: -1, ReadAheadBatchSize: 1})
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	b.SetBytes(benchEntry)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.ReadEntry(1, int64(rng.IntN(n))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadEntrySequential reads a ledger in order from the entry log
// with read-ahead (the catch-up pattern); the read cache is smaller than
// the ledger, so every pass goes back to the log.
func BenchmarkReadEntrySequential(b *testing.B) {
	const n = 20000
	dir := b.TempDir()
	db := benchOpen(b, dir, Options{})
	benchFill(b, db, n)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	db = benchOpen(b, dir, Options{ReadCacheMaxSize: 4 << 20})
	defer db.Close()
	b.SetBytes(benchEntry)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.ReadEntry(1, int64(i%n)); err != nil {
			b.Fatal(err)
		}
	}
}
