package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/managedledger"
)

// memoryHeadroom is what a server may use beyond its configured caches
// before the Go runtime's soft memory limit makes the garbage collector
// work harder: buffers in flight, per-topic and per-connection state, the
// index's memtables. Measured in make bench-report (TUNING.md).
const memoryHeadroom = 256 << 20

// Cache defaults the memory limit counts when the configuration leaves a
// size at zero: the ones managedledger and entrylog apply.
const (
	defaultEntryCacheMB = managedledger.DefaultCacheSize >> 20
	defaultWriteCacheMB = entrylog.DefaultWriteCacheMaxSize >> 20
	defaultReadCacheMB  = entrylog.DefaultReadCacheMaxSize >> 20
)

// setMemoryLimit gives the Go runtime a soft memory limit of the
// configured caches plus memoryHeadroom, unless GOMEMLIMIT sets one.
// Without it the heap may grow to twice what is live (GOGC=100) before a
// collection, so a full entry cache alone could take twice its size.
func setMemoryLimit(cacheMB int, log *slog.Logger) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return
	}
	limit := int64(cacheMB)<<20 + memoryHeadroom
	debug.SetMemoryLimit(limit)
	log.Info("memory limit set: the configured caches plus headroom (GOMEMLIMIT overrides)",
		"limit_mib", limit>>20, "caches_mib", cacheMB)
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
