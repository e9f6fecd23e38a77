package entrylog_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/entrylog/storagetest"
)

func TestMemoryConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, cp entrylog.Checkpointer) entrylog.Storage {
		return entrylog.NewMemory(cp)
	})
}

// TestDBConformance runs the suite on the real storage with three
// directories and small caches and logs, so that flushes, rotation,
// read-ahead and throttling all happen within the suite.
func TestDBConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, cp entrylog.Checkpointer) entrylog.Storage {
		return openConformanceDB(t, cp)
	})
}

// TestDBConformanceKept runs the suite with every add kept, as the
// bookie's: the write cache holds the caller's bytes, not a copy, and
// counts them against its halves.
func TestDBConformanceKept(t *testing.T) {
	storagetest.RunKept(t, func(t *testing.T, cp entrylog.Checkpointer) entrylog.KeepingStorage {
		return openConformanceDB(t, cp)
	})
}

func openConformanceDB(t *testing.T, cp entrylog.Checkpointer) *entrylog.DB {
	db, err := entrylog.Open(engine.NewMem(), []string{"/d0", "/d1", "/d2"}, entrylog.Options{
		LogSizeLimit:      64 << 10,
		WriteCacheMaxSize: 3 * 64 << 10,
		ReadCacheMaxSize:  3 * 32 << 10,
		FlushInterval:     20 * time.Millisecond,
		GCWaitTime:        -1,
		IndexFS:           vfs.NewMem(),
		Checkpointer:      cp,
		Logger:            quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}
