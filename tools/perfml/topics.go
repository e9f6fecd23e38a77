package perfml

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// TopicsReport is the memory cost of open topics.
type TopicsReport struct {
	Topics        int     `json:"topics"`
	OpenSeconds   float64 `json:"open_seconds"`
	HeapBefore    uint64  `json:"heap_before_bytes"`
	HeapAfter     uint64  `json:"heap_after_bytes"`
	BytesPerTopic float64 `json:"bytes_per_topic"`
}

// MeasureTopics opens n managed ledgers, each with a durable cursor and
// one entry, and reports the memory they add (live heap after a GC plus
// goroutine stacks), i.e. the per-topic cost on top of the entry cache.
func MeasureTopics(dir, backend string, n int) (*TopicsReport, error) {
	fsys, err := engine.New(engine.Options{Backend: backend, Logger: quiet()})
	if err != nil {
		return nil, err
	}
	s := &stack{fs: fsys, meta: metadata.NewMemoryServer(), jdir: filepath.Join(dir, "journal"), ldir: filepath.Join(dir, "ledgers")}
	if err := s.startBookie(); err != nil {
		return nil, err
	}
	defer s.stopBookie()
	if err := s.startFactory(); err != nil {
		return nil, err
	}
	defer s.stopFactory()
	ctx := context.Background()
	before := liveHeap()
	start := time.Now()
	mls := make([]managedledger.ManagedLedger, 0, n)
	for i := range n {
		ml, err := s.factory.Open(ctx, fmt.Sprintf("perf/ns/persistent/many-%d", i))
		if err != nil {
			return nil, err
		}
		if _, err := ml.OpenCursor(ctx, "sub", managedledger.CursorOptions{}); err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		ml.AddEntry([]byte("x"), func(_ managedledger.Position, err error) { done <- err })
		if err := <-done; err != nil {
			return nil, err
		}
		mls = append(mls, ml)
	}
	elapsed := time.Since(start)
	after := liveHeap()
	rep := &TopicsReport{Topics: n, OpenSeconds: elapsed.Seconds(), HeapBefore: before, HeapAfter: after,
		BytesPerTopic: (float64(after) - float64(before)) / float64(n)}
	for _, ml := range mls {
		_ = ml.Close(ctx)
	}
	return rep, nil
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse // goroutines' stacks count: each topic runs a few
}
