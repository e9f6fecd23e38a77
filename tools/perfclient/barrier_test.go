package perfclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBarrier: the driver releases the barrier only once every process
// said ready, and a process returns only once released; a process that
// exits before saying ready releases the others at once; a canceled or
// timed-out wait ends with its context's error.
func TestBarrier(t *testing.T) {
	dir := t.TempDir()
	released, passed := make(chan error, 1), make(chan error, 1)
	go func() { released <- ReleaseBarrier(context.Background(), dir, 2, nil) }()
	go func() { passed <- FileBarrier(dir)(context.Background()) }()
	select {
	case err := <-released:
		t.Fatalf("released with one of two processes ready: %v", err)
	case err := <-passed:
		t.Fatalf("a process passed before the release: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The second process, by hand (FileBarrier names its file by pid).
	if err := os.WriteFile(filepath.Join(dir, readyFilePrefix+"second"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err := <-passed; err != nil {
		t.Fatalf("barrier: %v", err)
	}

	exited := make(chan struct{}, 1)
	exited <- struct{}{}
	dir = t.TempDir()
	if err := ReleaseBarrier(context.Background(), dir, 3, exited); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, goFile)); err != nil {
		t.Fatalf("a process exited before ready: no go file (%v)", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := FileBarrier(t.TempDir())(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v, want context.Canceled", err)
	}
	if err := fileBarrier(t.TempDir(), 20*time.Millisecond)(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with no go file: %v, want its deadline", err)
	}
}
