package entrylog

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
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
// the rate the storage sustains, flushes included. Direct and buffered
// entry logs, each with adds copied (AddEntry) and kept (AddEntryKept, the
// bookie's); cpu-ns/op is the process's CPU time (user and system, every
// thread: the flusher and the kernel's copies too) per entry.
func BenchmarkAddEntry(b *testing.B) {
	for _, buffered := range []bool{false, true} {
		for _, kept := range []bool{false, true} {
			name := map[bool]string{false: "direct", true: "buffered"}[buffered] + "/" + map[bool]string{false: "copied", true: "kept"}[kept]
			b.Run(name, func(b *testing.B) { benchAddEntry(b, buffered, kept) })
		}
	}
}

func benchAddEntry(b *testing.B, buffered, kept bool) {
	efs, err := engine.New(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer efs.Close()
	opts := Options{LogSizeLimit: 256 << 20, BufferedWrites: buffered, Logger: testLogger(), IndexFS: vfs.Default}
	db, err := Open(efs, []string{b.TempDir()}, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchEntry)
	cpu := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A fresh entry per add, as the bookie's: kept data is never reused.
		data := make([]byte, benchEntry)
		data[0] = byte(i)
		if kept {
			err = db.AddEntryKept(int64(i%100), int64(i/100), data, crc32c.Known{})
		} else {
			err = db.AddEntry(int64(i%100), int64(i/100), data)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the process's user and system CPU time so far, in ns.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
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
