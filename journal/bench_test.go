package journal_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/journal"
)

// BenchmarkAdd drives the journal as bookie clients do: each writer adds
// an entry and waits for its acknowledgement before the next, on a real
// directory through the default io backend. `magnetar perf journal`
// measures the same with the disk's own limits beside it.
func BenchmarkAdd(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, writers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%dKiB/writers=%d", size>>10, writers), func(b *testing.B) {
				benchAdd(b, size, writers)
			})
		}
	}
}

func benchAdd(b *testing.B, size, writers int) {
	discard := slog.New(slog.DiscardHandler)
	fs, err := engine.New(engine.Options{Backend: engine.BackendAuto, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	j, err := journal.Open(fs, filepath.Join(b.TempDir(), "journal"), journal.Options{Logger: discard},
		func(journal.Entry) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size)
	var mu sync.Mutex // callbacks may run on the writer or the sync goroutine
	hist := hdrhistogram.New(1, 60_000_000, 3)
	var issued atomic.Int64
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			for n := issued.Add(1); n <= int64(b.N); n = issued.Add(1) {
				start := time.Now()
				err := j.Add(int64(w), n, payload, func(_ journal.Mark, err error) {
					mu.Lock()
					_ = hist.RecordValue(time.Since(start).Microseconds())
					mu.Unlock()
					done <- err
				})
				if err == nil {
					err = <-done
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-us")
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
}
