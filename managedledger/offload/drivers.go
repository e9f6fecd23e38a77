package offload

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/magnetar-io/magnetar/engine"
)

// Driver names this build offers.
const (
	DriverFilesystem = "filesystem"
	DriverMemory     = "memory"
)

// pulsarDrivers are Pulsar's built-in offload driver names
// (OffloadPoliciesImpl.INTERNAL_SUPPORTED_DRIVER), in Pulsar's order.
// Pulsar compares them ignoring case (driverSupported uses
// equalsIgnoreCase), and so does KnownDriver.
var pulsarDrivers = []string{"S3", "aws-s3", "google-cloud-storage", "filesystem", "azureblob", "aliyun-oss"}

// otherDrivers are names that are not Pulsar built-ins but that operators
// write for tiered storage: "gcs" (shorthand for google-cloud-storage) and
// "transparent-proxy" (a driver a Pulsar deployment can add through
// -Dpulsar.extra.offload.drivers). New answers them with
// ErrUnsupportedDriver rather than "unknown"; KnownDriver stays false, as
// Pulsar's admin API rejects them without that extra setting.
var otherDrivers = []string{"gcs", "transparent-proxy"}

// Batch limits of Offload (Config.BatchEntries, Config.BatchBytes).
const (
	DefaultBatchEntries = 100
	DefaultBatchBytes   = 4 << 20
)

// Config configures New.
type Config struct {
	// Root is where the filesystem driver stores copies: a directory, or a
	// file:// URI (Pulsar's fileSystemURI and storage path, joined). Other
	// URI schemes (hdfs://) are not supported.
	Root string
	// FS is the file system under Root; nil means engine.NewStd().
	FS engine.FS
	// BatchEntries and BatchBytes bound one read from the Source during
	// Offload: at most BatchEntries entries, and about BatchBytes bytes
	// (the batch size adapts to the entry sizes seen so far). Zero means
	// DefaultBatchEntries and DefaultBatchBytes.
	BatchEntries int
	BatchBytes   int
}

// New builds an offloader for a Pulsar driver name: "filesystem" or
// "memory". Pulsar's other drivers are ErrUnsupportedDriver; an unknown
// name is an error listing Pulsar's names.
func New(driver string, cfg Config) (Offloader, error) {
	switch {
	case strings.EqualFold(driver, DriverFilesystem):
		return newFilesystem(cfg)
	case strings.EqualFold(driver, DriverMemory):
		return newMemory(cfg.limits()), nil
	case KnownDriver(driver) || containsFold(otherDrivers, driver):
		return nil, fmt.Errorf("offload driver %q: %w: this build offers %q (and %q for tests)",
			driver, ErrUnsupportedDriver, DriverFilesystem, DriverMemory)
	case driver == "":
		return nil, fmt.Errorf("offload: no driver named (Pulsar's managedLedgerOffloadDriver is empty, which means offload is off)")
	default:
		return nil, fmt.Errorf("unknown offload driver %q: Pulsar's drivers are %s; this build offers %q",
			driver, strings.Join(pulsarDrivers, ", "), DriverFilesystem)
	}
}

// KnownDriver reports whether name is one of Pulsar's offload driver
// names, ignoring case as Pulsar does.
func KnownDriver(name string) bool { return containsFold(pulsarDrivers, name) }

// PulsarDrivers lists Pulsar's built-in driver names, in Pulsar's order.
func PulsarDrivers() []string { return append([]string(nil), pulsarDrivers...) }

func containsFold(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// batchLimits bound one read from a Source.
type batchLimits struct {
	entries int
	bytes   int
}

func (c Config) limits() batchLimits {
	l := batchLimits{entries: c.BatchEntries, bytes: c.BatchBytes}
	if l.entries <= 0 {
		l.entries = DefaultBatchEntries
	}
	if l.bytes <= 0 {
		l.bytes = DefaultBatchBytes
	}
	return l
}

// parseRoot turns Config.Root (a path or a file:// URI) into a clean path.
func parseRoot(root string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("offload: the filesystem driver needs Config.Root (Pulsar's fileSystemURI and storage path)")
	}
	if !strings.Contains(root, "://") && !strings.HasPrefix(root, "file:") {
		return filepath.Clean(root), nil
	}
	u, err := url.Parse(root)
	if err != nil {
		return "", fmt.Errorf("offload: filesystem root %q: %w", root, err)
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("offload: filesystem root %q: scheme %q not supported (this build writes local files: give a path or a file:// URI)", root, u.Scheme)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("offload: filesystem root %q: host %q not supported (file URIs must be local)", root, u.Host)
	}
	if u.Path == "" {
		return "", fmt.Errorf("offload: filesystem root %q has no path", root)
	}
	return filepath.Clean(u.Path), nil
}
