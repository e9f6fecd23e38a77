package main

import (
	"slices"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// Results is everything one report measured (results.json).
type Results struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Options  string    `json:"options"`
	Machine  Machine   `json:"machine"`
	Disk     Disk      `json:"disk"`
	Loopback float64   `json:"loopbackMiBPerSec"`

	Standalone Deployment `json:"standalone"`
	// Memory is the standalone on in-memory storage: the broker and the
	// clients without the storage path, at the standalone's rates.
	Memory Deployment `json:"memoryStorage"`
	// MemoryBound is in-memory storage's resident memory over long runs
	// (memory.go).
	MemoryBound *MemoryBound `json:"memoryBound,omitempty"`
	// JournalDev is the durable standalone with its journal on a device
	// of its own (journaldev.go).
	JournalDev Deployment `json:"journalDevice"`
	// Traced is the durable standalone's 50% point run again with the
	// flight recorder on (flightRecorderDir): the traces of slow publishes.
	Traced *Traced `json:"traced,omitempty"`
	// Pinned is the headline runs with the server on one core and the
	// clients on the other (pinned.go).
	Pinned  PinnedResult `json:"pinned"`
	Cluster Deployment   `json:"cluster"`
	NATS    NATS         `json:"nats"`

	// The sections of the security, proxy, etcd and geo-replication
	// issues.
	TLS      TLSResult      `json:"tls"`
	Proxy    ProxyResult    `json:"proxy"`
	Metadata MetadataResult `json:"metadata"`
	Geo      GeoResult      `json:"geo"`
	SyncGeo  SyncGeoResult  `json:"syncGeo"`
	Txn      TxnResult      `json:"txn"`

	Sections []string `json:"sections"` // what ran (--only)
	Notes    []string `json:"notes,omitempty"`
}

// TLSResult is the 1 KiB maximum over one standalone's plaintext and TLS
// ports, runs alternated.
type TLSResult struct {
	Ran     bool   `json:"ran"`
	Setup   string `json:"setup"`
	Plain   []Run  `json:"plaintext"`
	TLS     []Run  `json:"tls"`
	Skipped string `json:"skipped,omitempty"`
}

// ProxyResult is the 1 KiB maximum and fixed-rate latency direct to a
// standalone and through one magnetar proxy in front of it.
type ProxyResult struct {
	Ran         bool   `json:"ran"`
	Setup       string `json:"setup"`
	DirectMax   []Run  `json:"directMax"`
	ProxyMax    []Run  `json:"proxyMax"`
	DirectFixed *Run   `json:"directFixed"` // e2e at 50% of the direct maximum's median
	ProxyFixed  *Run   `json:"proxyFixed"`
	// ProxyCPUSeconds and ProxyBytes are the proxy's CPU time and the
	// bytes it piped (both ways) over every run through it.
	ProxyCPUSeconds float64 `json:"proxyCpuSeconds"`
	ProxyBytes      float64 `json:"proxyBytes"`
	Skipped         string  `json:"skipped,omitempty"`
}

// CPUPerGiB is the proxy's CPU seconds per GiB it forwarded.
func (p ProxyResult) CPUPerGiB() float64 {
	if p.ProxyBytes <= 0 {
		return 0
	}
	return p.ProxyCPUSeconds / (p.ProxyBytes / (1 << 30))
}

// MetadataResult is the metadata store load on each backend.
type MetadataResult struct {
	Ran         bool          `json:"ran"`
	Concurrency int           `json:"concurrency"`
	ValueBytes  int           `json:"valueBytes"`
	Backends    []MetaBackend `json:"backends"`
	Skipped     string        `json:"skipped,omitempty"`
}

// MetaBackend is one backend's operations and topic load times.
type MetaBackend struct {
	Name string   `json:"name"` // local, zookeeper, etcd
	URL  string   `json:"url"`
	Ops  []MetaOp `json:"ops"`
	// Topics were created (a producer each) in CreateSeconds, and loaded
	// again after their namespace was unloaded in ReloadSeconds.
	Topics        int     `json:"topics"`
	CreateSeconds float64 `json:"topicCreateSeconds"`
	ReloadSeconds float64 `json:"topicReloadSeconds"`
	TopicsSkipped string  `json:"topicsSkipped,omitempty"`
	Skipped       string  `json:"skipped,omitempty"`
}

// MetaOp is one kind of metadata operation at a fixed concurrency.
type MetaOp struct {
	Op      string          `json:"op"` // create, cas-put, get, children
	Count   int64           `json:"count"`
	Errors  int64           `json:"errors"`
	PerSec  float64         `json:"perSec"`
	Latency perfkit.Latency `json:"latencyUs"`
}

// GeoResult is replication between two standalones: a producer on A at a
// fixed rate, a consumer of the replicated topic on B.
type GeoResult struct {
	Ran      bool   `json:"ran"`
	Setup    string `json:"setup"`
	Producer *Run   `json:"producer"` // on A, at the fixed rate
	Consumer *Run   `json:"consumer"` // on B: its e2e latency is the replication latency
	// MaxProducer and MaxConsumer are the unthrottled pass: what B
	// received per second is the replication throughput.
	MaxProducer *Run `json:"maxProducer,omitempty"`
	MaxConsumer *Run `json:"maxConsumer,omitempty"`
	// Pinned is the same replication with each cluster on its own core
	// (--geo-pinned; nil when off).
	Pinned  *GeoPinned `json:"pinned,omitempty"`
	Skipped string     `json:"skipped,omitempty"`
}

// GeoPinned is replication with A and its clients pinned to one core and
// B and its clients to another (geopin.go).
type GeoPinned struct {
	Setup string `json:"setup"`
	CoreA string `json:"coreA"` // taskset CPU list
	CoreB string `json:"coreB"`
	// Baseline is A alone, its producer unthrottled: one one-core
	// cluster's publish rate.
	Baseline *Run `json:"baseline"`
	// Max is A's producer unthrottled; AtTarget at targetGeoVsPublish of
	// the baseline.
	Max      GeoPass `json:"unthrottled"`
	AtTarget GeoPass `json:"atTarget"`
	Skipped  string  `json:"skipped,omitempty"`
}

// GeoPass is one replication pass: A's producer, B's consumer and A's
// replication backlog to B while the producer ran.
type GeoPass struct {
	Producer *Run            `json:"producer"`
	Consumer *Run            `json:"consumer"`
	Backlog  []BacklogSample `json:"backlog"`
	// BacklogGrowthPS is the backlog's least-squares slope over the
	// measured window, messages per second.
	BacklogGrowthPS float64 `json:"backlogGrowthPerSec"`
}

// BacklogSample is A's replication backlog to B at one moment.
type BacklogSample struct {
	At           float64 `json:"t"` // seconds since A's producer started
	Messages     int64   `json:"messages"`
	DelaySeconds int64   `json:"delaySeconds"` // the replicator's replicationDelayInSeconds
}

// SyncGeoResult is publish latency on a stretched cluster (a bookie per
// region, the broker's remote bookies through delaying relays) with no
// inter-region delay (Local) and with a round trip of RTTMillis (Remote),
// passes alternated.
type SyncGeoResult struct {
	Ran       bool    `json:"ran"`
	Setup     string  `json:"setup"`
	RTTMillis float64 `json:"rttMillis"`
	Local     []Run   `json:"local"`
	Remote    []Run   `json:"remote"`
	Skipped   string  `json:"skipped,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpuModel"`
	MemMiB   int64  `json:"memMiB"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

// Disk is the machine's storage limits, measured by magnetar perf disk
// on the directory the servers write to.
type Disk struct {
	GroupBytes     int     `json:"groupBytes"`
	SyncMiBPerSec  float64 `json:"writeDatasyncMiBPerSec"` // at GroupBytes, best backend
	SyncBackend    string  `json:"writeDatasyncBackend"`
	SyncP50Micros  int64   `json:"datasync4kP50Us"` // one 4 KiB append+datasync at a time
	SyncP99Micros  int64   `json:"datasync4kP99Us"`
	ColdReadMiBSec float64 `json:"coldSeqReadMiBPerSec"`
}

// Run is one client run with the servers' CPU use during it.
type Run struct {
	Label       string            `json:"label"`
	Report      perfclient.Report `json:"report"`
	ServerCores float64           `json:"serverCores"` // CPU cores the servers used on average
	// MachineCores is the CPU the whole machine was busy with (servers,
	// clients, the kernel's I/O threads), on average; 0 if unknown.
	MachineCores float64 `json:"machineCores,omitempty"`
	// ClientCores is the CPU the client processes used, summed, each over
	// its measured window (over its life for a client that does not report
	// it, natsperf's); ClientProcesses how many ran at once.
	ClientCores     float64 `json:"clientCores,omitempty"`
	ClientProcesses int     `json:"clientProcesses,omitempty"`
	Percent         int     `json:"percentOfMax,omitempty"`
	// Stages is the publish path by stage during the run (the 50% points).
	Stages []StageLatency `json:"stages,omitempty"`
}

// Deployment is what one Magnetar deployment measured.
type Deployment struct {
	Ran        bool    `json:"ran"`
	Setup      string  `json:"setup"`
	Max        []Run   `json:"max"`        // unthrottled publish, by message size
	Fixed      []Run   `json:"fixed"`      // e2e at fixed rates
	Topics     []Run   `json:"topics"`     // many topics
	CatchUp    *Run    `json:"catchUp"`    // backlog read after a cold restart
	BacklogMiB float64 `json:"backlogMiB"` // what CatchUp read (and CatchUpWarm)
	// CatchUpWarm is a second backlog, as large and as cold (never read
	// since the restart), read right after CatchUp by the same process:
	// the catch-up of a broker whose heap has its working size.
	CatchUpWarm *Run `json:"catchUpWarm,omitempty"`
	// PeakRSSMiB is the highest over the deployments its runs started
	// (one per run) of their processes' peak resident memory, summed.
	PeakRSSMiB float64 `json:"peakRssMiB"`
	CacheMiB   float64 `json:"cacheMiB"` // its processes' configured cache sizes, summed
	Profile    string  `json:"profileTop,omitempty"`
	Skipped    string  `json:"skipped,omitempty"`
}

// NATS is what NATS JetStream measured: by natsperf (Default, Always,
// DefaultFixed; Skipped says why they are missing) and by natscli (CLI).
type NATS struct {
	Server       string `json:"server"`
	Default      *Run   `json:"default"`
	Always       *Run   `json:"always"`
	DefaultFixed *Run   `json:"defaultFixed"` // e2e at Magnetar's 50% rate
	Skipped      string `json:"skipped,omitempty"`
	// CLI is NATS's own benchmark of the default sync; nil when the
	// section did not run.
	CLI *NATSCLI `json:"natscli,omitempty"`
}

// NATSCLI is `nats bench js pub async` (natscli) against a fresh
// nats-server with the default sync: the NATS figure of the throughput
// target measured by NATS's own tool as well as by our driver.
type NATSCLI struct {
	Version string `json:"version"` // nats --version
	Command string `json:"command"` // the command line run
	// Run's report has the message size, the messages published, natscli's
	// msg/s and the seconds they took (messages / msg/s); no latencies:
	// natscli measures them per batch, not per message.
	Run     *Run   `json:"run,omitempty"`
	Summary string `json:"summary,omitempty"` // natscli's stats line, as printed
	Skipped string `json:"skipped,omitempty"`
}

// maxOf is the unthrottled run of size bytes, if it ran.
func (d Deployment) maxOf(size int) *Run {
	for i := range d.Max {
		if d.Max[i].Report.MessageSize == size {
			return &d.Max[i]
		}
	}
	return nil
}

// fixedAt is the fixed-rate run at pct percent of the maximum.
func (d Deployment) fixedAt(pct int) *Run {
	for i := range d.Fixed {
		if d.Fixed[i].Percent == pct {
			return &d.Fixed[i]
		}
	}
	return nil
}

// medianPS is the median publish rate of runs (the mean of the middle two
// for an even count), 0 with none.
func medianPS(runs []Run) float64 {
	if len(runs) == 0 {
		return 0
	}
	ps := make([]float64, len(runs))
	for i, r := range runs {
		ps[i] = r.Report.PublishPS
	}
	slices.Sort(ps)
	n := len(ps)
	if n%2 == 1 {
		return ps[n/2]
	}
	return (ps[n/2-1] + ps[n/2]) / 2
}

// Traced is a fixed-rate run with the flight recorder on.
type Traced struct {
	Run    Run         `json:"run"`
	Traces []string    `json:"traces"` // files under the report directory
	Waits  []TraceWait `json:"waits,omitempty"`
}

// TraceWait is one row of `magnetar trace waits` on a trace: how long
// goroutines that started in Kind waited to run once runnable.
type TraceWait struct {
	Trace string  `json:"trace"`
	Kind  string  `json:"kind"`
	N     int     `json:"n"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}
