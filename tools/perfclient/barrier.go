package perfclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The start barrier of a spread run, through files in one directory: each
// process creates readyFilePrefix+<pid> there once its clients exist
// (FileBarrier) and waits for goFile; whoever runs the processes creates
// goFile once every one is ready (ReleaseBarrier).
const (
	readyFilePrefix = "ready-"
	goFile          = "go"
)

// barrierPoll is how often either side looks at the directory: well under
// the warm-up, so the processes start within this of each other.
const barrierPoll = 5 * time.Millisecond

// BarrierTimeout bounds a process's wait for goFile: a run whose other
// processes never got ready (or whose driver died) ends with an error
// instead of waiting for ever.
const BarrierTimeout = 10 * time.Minute

// FileBarrier is a StartBarrier through files in dir (which must exist),
// waiting at most BarrierTimeout.
func FileBarrier(dir string) func(context.Context) error {
	return fileBarrier(dir, BarrierTimeout)
}

func fileBarrier(dir string, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ready := filepath.Join(dir, fmt.Sprintf("%s%d", readyFilePrefix, os.Getpid()))
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			return fmt.Errorf("say ready: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		path := filepath.Join(dir, goFile)
		return pollUntil(ctx, nil, func() (bool, error) {
			_, err := os.Stat(path)
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("wait for %s: %w", path, err)
			}
			return true, nil
		})
	}
}

// ReleaseBarrier creates dir's go file once n processes said ready, or at
// once when one of them exited first (it failed: the others must not wait
// for their timeout) or ctx ended.
func ReleaseBarrier(ctx context.Context, dir string, n int, exited <-chan struct{}) error {
	_ = pollUntil(ctx, exited, func() (bool, error) {
		ready, err := filepath.Glob(filepath.Join(dir, readyFilePrefix+"*"))
		return err != nil || len(ready) >= n, nil
	})
	if err := os.WriteFile(filepath.Join(dir, goFile), nil, 0o644); err != nil {
		return fmt.Errorf("release the start barrier: %w", err)
	}
	return nil
}

// pollUntil calls done every barrierPoll until it says true or fails,
// stop is closed or sends, or ctx ends (its error).
func pollUntil(ctx context.Context, stop <-chan struct{}, done func() (bool, error)) error {
	t := time.NewTicker(barrierPoll)
	defer t.Stop()
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
