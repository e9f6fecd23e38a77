package main

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
)

// storageSettings are the ledger-storage keys of bk_server.conf
// (DbLedgerStorage's names); zero values take entrylog's defaults.
type storageSettings struct {
	logSizeLimit      int64
	writeCacheMB      int
	readCacheMB       int
	readAheadEntries  int
	readAheadBytes    int64
	gcWaitTime        time.Duration
	minorThreshold    float64
	minorInterval     time.Duration
	majorThreshold    float64
	majorInterval     time.Duration
	indexCacheBytes   int64
	maxThrottle       time.Duration
	storageFlushEvery time.Duration
	flushRateMB       int // MiB/s; negative: unpaced
	directIO          bool
}

func defaultStorageSettings() storageSettings { return storageSettings{directIO: true} }

// cacheMB is the write and read-ahead caches together, in MiB.
func (s storageSettings) cacheMB() int {
	return orDefault(s.writeCacheMB, defaultWriteCacheMB) + orDefault(s.readCacheMB, defaultReadCacheMB)
}

func (s *storageSettings) confKeys() map[string]confSetter {
	return map[string]confSetter{
		"logSizeLimit":                           setInt64(&s.logSizeLimit),
		"dbStorage_writeCacheMaxSizeMb":          setInt(&s.writeCacheMB),
		"dbStorage_readAheadCacheMaxSizeMb":      setInt(&s.readCacheMB),
		"dbStorage_readAheadCacheBatchSize":      setInt(&s.readAheadEntries),
		"dbStorage_readAheadCacheBatchBytesSize": setInt64(&s.readAheadBytes),
		"dbStorage_rocksDB_blockCacheSize":       setInt64(&s.indexCacheBytes),
		"dbStorage_maxThrottleTimeMs":            setDuration(&s.maxThrottle, time.Millisecond),
		"gcWaitTime":                             setDuration(&s.gcWaitTime, time.Millisecond),
		"minorCompactionThreshold":               setFloat(&s.minorThreshold),
		"minorCompactionInterval":                setDuration(&s.minorInterval, time.Second),
		"majorCompactionThreshold":               setFloat(&s.majorThreshold),
		"majorCompactionInterval":                setDuration(&s.majorInterval, time.Second),
		"dbStorage_flushIntervalMs":              setDuration(&s.storageFlushEvery, time.Millisecond),
		"dbStorage_flushRateMbPerSec":            setInt(&s.flushRateMB),
		"dbStorage_directIOEntryLogger":          setBool(&s.directIO),
	}
}

func (s storageSettings) options(cp entrylog.Checkpointer, log *slog.Logger) entrylog.Options {
	return entrylog.Options{
		LogSizeLimit: s.logSizeLimit, WriteCacheMaxSize: int64(s.writeCacheMB) << 20, ReadCacheMaxSize: int64(s.readCacheMB) << 20,
		ReadAheadBatchSize: s.readAheadEntries, ReadAheadMaxBytes: s.readAheadBytes, FlushInterval: s.storageFlushEvery,
		MaxThrottleTime: s.maxThrottle, GCWaitTime: s.gcWaitTime,
		MinorCompactionThreshold: s.minorThreshold, MinorCompactionInterval: s.minorInterval,
		MajorCompactionThreshold: s.majorThreshold, MajorCompactionInterval: s.majorInterval,
		IndexCacheSize: s.indexCacheBytes, FlushRate: int64(s.flushRateMB) << 20, BufferedWrites: !s.directIO,
		Checkpointer: cp, Logger: log,
	}
}

// openLedgerStorage opens the bookie's ledger storage; with reg set, its
// statistics are exported under BookKeeper's DbLedgerStorage names.
func openLedgerStorage(fs engine.FS, dirs []string, s storageSettings, cp entrylog.Checkpointer, log *slog.Logger, reg prometheus.Registerer) (entrylog.Storage, error) {
	db, err := entrylog.Open(fs, dirs, s.options(cp, log))
	if err != nil {
		return nil, err
	}
	if reg != nil {
		reg.MustRegister(storageCollector{db})
	}
	return db, nil
}

// storageCollector exports entrylog.Stats at scrape time.
type storageCollector struct{ db *entrylog.DB }

type storageMetric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(entrylog.Stats) float64
}

var storageMetrics = []storageMetric{
	{"bookie_write_cache_size", "Bytes in the write caches.", prometheus.GaugeValue, func(s entrylog.Stats) float64 { return float64(s.WriteCacheBytes) }},
	{"bookie_read_cache_size", "Bytes in the read caches.", prometheus.GaugeValue, func(s entrylog.Stats) float64 { return float64(s.ReadCacheBytes) }},
	{"bookie_ledgers_count", "Ledgers with state on this bookie.", prometheus.GaugeValue, func(s entrylog.Stats) float64 { return float64(s.Ledgers) }},
	{"bookie_entry_logs", "Entry-log files open.", prometheus.GaugeValue, func(s entrylog.Stats) float64 { return float64(s.EntryLogs) }},
	{"bookie_write_cache_hits_total", "Reads served by the write cache.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.WriteCacheHits) }},
	{"bookie_read_cache_hits_total", "Reads served by the read cache.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.ReadCacheHits) }},
	{"bookie_read_cache_misses_total", "Reads that went to an entry log.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.ReadCacheMisses) }},
	{"bookie_read_entry_log_bytes_total", "Bytes read from entry logs, read-ahead included.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.EntryLogReadBytes) }},
	{"bookie_flush_total", "Write-cache flushes to entry logs.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.Flushes) }},
	{"bookie_flush_bytes_total", "Bytes flushed to entry logs.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.FlushedBytes) }},
	{"bookie_flush_seconds_total", "Time spent flushing the write cache.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return s.FlushTime.Seconds() }},
	{"bookie_throttled_write_total", "Adds that waited for a full write cache.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.ThrottledAdds) }},
	{"bookie_gc_ledgers_deleted_total", "Ledgers deleted.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.LedgersDeleted) }},
	{"bookie_gc_reclaimed_bytes_total", "Bytes of entry logs removed by GC and compaction.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.ReclaimedBytes) }},
	{"bookie_compactions_total", "Entry logs compacted.", prometheus.CounterValue, func(s entrylog.Stats) float64 { return float64(s.Compactions) }},
}

func (c storageCollector) desc(m storageMetric) *prometheus.Desc {
	return prometheus.NewDesc(m.name, m.help, nil, nil)
}

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range storageMetrics {
		ch <- c.desc(m)
	}
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.db.Stats()
	for _, m := range storageMetrics {
		ch <- prometheus.MustNewConstMetric(c.desc(m), m.kind, m.value(st))
	}
}
