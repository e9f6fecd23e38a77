package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"
)

// The stream every run loads: one subject, so Topics is 1 in the report.
const (
	streamName   = "NATSPERF"
	streamFilter = "perf.>"
	subject      = "perf.0"
	consumerName = "natsperf-e2e"
)

// msgOverhead approximates the file store's bytes per message beyond the
// payload (record header, subject, sequence, timestamp, checksum).
const msgOverhead = 64

// minMaxBytes is the smallest stream limit set, so short runs never hit it.
const minMaxBytes = 256 << 20

// createStream makes a fresh stream: file storage, one replica, limits
// retention with only a byte limit, discarding the oldest messages past it
// so an unthrottled run on a small disk keeps going rather than failing.
// A stream left by an earlier run against --url is deleted first.
func createStream(ctx context.Context, js jetstream.JetStream, maxBytes int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, streamName); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("deleting old stream %s: %w", streamName, err)
	}
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      streamName,
		Subjects:  []string{streamFilter},
		Storage:   jetstream.FileStorage,
		Replicas:  1,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardOld,
		MaxBytes:  maxBytes,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s (max bytes %d): %w", streamName, maxBytes, err)
	}
	return nil
}

// streamMaxBytes is a byte limit large enough for the run: twice what a
// throttled run writes, or for an unthrottled one (whose volume is not
// known ahead) half the free space where the store is. The server refuses
// a stream larger than its own storage limit (by default 75% of the free
// space), hence the cap at half.
func streamMaxBytes(cfg Config, storeDir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(storeDir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", storeDir, err)
	}
	half := int64(st.Bavail) * int64(st.Bsize) / 2
	want := half
	if cfg.Rate > 0 {
		seconds := (cfg.Warmup + cfg.Duration).Seconds()
		want = max(int64(2*cfg.Rate*seconds*float64(cfg.Size+msgOverhead)), minMaxBytes)
	}
	return min(want, half), nil
}
