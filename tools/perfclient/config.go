package perfclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// Modes of a run.
const (
	ModeProduce = "produce" // producers only
	ModeConsume = "consume" // consumers only: something else produces
	ModeE2E     = "e2e"     // both, in this process
)

// TimestampBytes is the length of the send time (unix nanoseconds, big
// endian) at the start of every payload; messages shorter than this carry
// no time and get no end-to-end latency.
const TimestampBytes = 8

// Config is one run. Counts are per topic, as pulsar-perf counts them.
type Config struct {
	Mode       string
	ServiceURL string // pulsar://host:6650 (pulsar+ssl://host:6651: TLS)
	// TLSTrustCertsFile is the CA file for a pulsar+ssl:// ServiceURL;
	// TLSAllowInsecure accepts any broker certificate.
	TLSTrustCertsFile string
	TLSAllowInsecure  bool
	// AuthToken, if set, authenticates with this token.
	AuthToken  string
	AdminURL   string   // http://host:8080, used only when Partitions > 0
	Topics     []string // full names; see TopicNames
	Partitions int      // > 0: create the topics partitioned first

	Producers        int
	Consumers        int
	Subscription     string
	SubscriptionType pulsar.SubscriptionType
	ReceiverQueue    int // consumer receiver queue (0: client default)

	Size             int     // payload bytes, at least TimestampBytes
	Rate             float64 // msg/s over all producers; 0: unthrottled
	Batching         bool
	BatchMaxMessages uint // 0: client default
	BatchMaxBytes    uint // 0: client default
	BatchDelay       time.Duration
	MaxPending       int // producer MaxPendingMessages (0: client default)
	// TxnSize > 0 publishes in transactions of this many messages each
	// (pulsar-perf's --txn-enable and --numMessage-perTransaction); a
	// message's publish latency then runs to its transaction's commit,
	// when consumers can first see it.
	TxnSize int
	// TxnOpenAhead > 0: each producer keeps this many transactions being
	// opened (their first message sent) while the current one fills
	// (txnOpener).
	TxnOpenAhead int
	Compression  pulsar.CompressionType

	Warmup      time.Duration // unmeasured load before the window
	Duration    time.Duration // the window, when NumMessages is 0
	NumMessages int64         // > 0: the window ends after this many messages
	Progress    time.Duration // live line and timeline interval (0: none)
	// Drain is how long e2e waits, after the last acknowledgement, for
	// the consumers to receive what was published.
	Drain time.Duration
	// StartBarrier, when set, is waited for once every producer and
	// consumer exists and before the warm-up starts: processes of one
	// spread run (FileBarrier) then warm up and measure together, none
	// while another still creates its producers (10,000 topics take
	// seconds to load).
	StartBarrier func(context.Context) error

	System, Variant string       // copied into the report
	Logger          *slog.Logger // the Pulsar client's log (nil: none)
}

// DefaultConfig is pulsar-perf's defaults where it has them.
func DefaultConfig(mode string) Config {
	return Config{Mode: mode, ServiceURL: "pulsar://localhost:6650", AdminURL: "http://localhost:8080",
		Topics: []string{"persistent://public/default/perf"}, Producers: 1, Consumers: 1,
		Subscription: "perf-sub", SubscriptionType: pulsar.Exclusive, Size: 1024, Batching: true,
		BatchMaxMessages: 1000, BatchMaxBytes: 128 << 10, BatchDelay: time.Millisecond, MaxPending: 1000,
		Warmup: 2 * time.Second, Duration: 30 * time.Second, Progress: 5 * time.Second,
		Drain: 5 * time.Second, System: "magnetar"}
}

// Validate says what is wrong with c, naming the setting.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Mode {
	case ModeProduce, ModeConsume, ModeE2E:
	default:
		bad("mode %q: want produce, consume or e2e", c.Mode)
	}
	if len(c.Topics) == 0 {
		bad("no topics")
	}
	if c.producing() && c.Producers < 1 {
		bad("producers %d: want 1 or more", c.Producers)
	}
	if c.consuming() && c.Consumers < 1 {
		bad("consumers %d: want 1 or more", c.Consumers)
	}
	if c.consuming() && c.Subscription == "" {
		bad("no subscription name")
	}
	if c.producing() && c.Size < TimestampBytes {
		bad("size %d: want at least %d (the send time)", c.Size, TimestampBytes)
	}
	if c.Rate < 0 || c.Partitions < 0 || c.NumMessages < 0 || c.MaxPending < 0 || c.ReceiverQueue < 0 {
		bad("rate, partitions, num-messages, max-pending and receiver-queue must not be negative")
	}
	if c.Warmup < 0 || c.Progress < 0 || c.Drain < 0 || c.BatchDelay < 0 {
		bad("warmup, progress, drain and batch-delay must not be negative")
	}
	if c.NumMessages == 0 && c.Duration <= 0 {
		bad("duration %v: want a positive duration or a message count", c.Duration)
	}
	return errors.Join(errs...)
}

func (c Config) producing() bool { return c.Mode == ModeProduce || c.Mode == ModeE2E }
func (c Config) consuming() bool { return c.Mode == ModeConsume || c.Mode == ModeE2E }

// TopicNames expands each name into name-0 .. name-(n-1) when n > 1, as
// pulsar-perf's --num-topics does.
func TopicNames(names []string, n int) []string {
	if n <= 1 {
		return names
	}
	out := make([]string, 0, len(names)*n)
	for _, name := range names {
		for i := range n {
			out = append(out, fmt.Sprintf("%s-%d", name, i))
		}
	}
	return out
}

// ParseSubscriptionType reads Exclusive, Shared, Failover or Key_Shared
// (any case; KeyShared too).
func ParseSubscriptionType(s string) (pulsar.SubscriptionType, error) {
	switch strings.ToLower(s) {
	case "exclusive":
		return pulsar.Exclusive, nil
	case "shared":
		return pulsar.Shared, nil
	case "failover":
		return pulsar.Failover, nil
	case "key_shared", "keyshared":
		return pulsar.KeyShared, nil
	}
	return 0, fmt.Errorf("%q: want Exclusive, Shared, Failover or Key_Shared", s)
}

// ParseCompression reads none, lz4, zlib, zstd or snappy.
func ParseCompression(s string) (pulsar.CompressionType, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return pulsar.NoCompression, nil
	case "lz4":
		return pulsar.LZ4, nil
	case "zlib":
		return pulsar.ZLib, nil
	case "zstd":
		return pulsar.ZSTD, nil
	case "snappy":
		return pulsar.SNAPPY, nil
	}
	return 0, fmt.Errorf("%q: want none, lz4, zlib, zstd or snappy", s)
}
