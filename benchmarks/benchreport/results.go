package main

import (
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
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
	Memory  Deployment `json:"memoryStorage"`
	Cluster Deployment `json:"cluster"`
	NATS    NATS       `json:"nats"`
	Notes   []string   `json:"notes,omitempty"`
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
	Percent     int               `json:"percentOfMax,omitempty"`
}

// Deployment is what one Magnetar deployment measured.
type Deployment struct {
	Ran        bool    `json:"ran"`
	Setup      string  `json:"setup"`
	Max        []Run   `json:"max"`        // unthrottled publish, by message size
	Fixed      []Run   `json:"fixed"`      // e2e at fixed rates
	Topics     []Run   `json:"topics"`     // many topics
	CatchUp    *Run    `json:"catchUp"`    // backlog read after a cold restart
	BacklogMiB float64 `json:"backlogMiB"` // what CatchUp read
	PeakRSSMiB float64 `json:"peakRssMiB"` // the servers' peak resident memory, summed
	CacheMiB   float64 `json:"cacheMiB"`   // their configured cache sizes, summed
	Profile    string  `json:"profileTop,omitempty"`
	Skipped    string  `json:"skipped,omitempty"`
}

// NATS is what NATS JetStream measured.
type NATS struct {
	Server       string `json:"server"`
	Default      *Run   `json:"default"`
	Always       *Run   `json:"always"`
	DefaultFixed *Run   `json:"defaultFixed"` // e2e at Magnetar's 50% rate
	Skipped      string `json:"skipped,omitempty"`
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
