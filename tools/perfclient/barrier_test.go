package perfclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileBarrier: a process says ready, waits while there is no go file,
// returns once there is; a canceled wait ends with the context's error.
func TestFileBarrier(t *testing.T) {
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() { done <- FileBarrier(dir)(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := ReadyCount(dir)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no ready file")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the barrier opened before the go file: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(dir, GoFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("barrier: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := FileBarrier(t.TempDir())(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v, want context.Canceled", err)
	}
	// Nobody ever creates the go file: the wait is bounded.
	if err := fileBarrier(t.TempDir(), 20*time.Millisecond)(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with no go file: %v, want its deadline", err)
	}
}
