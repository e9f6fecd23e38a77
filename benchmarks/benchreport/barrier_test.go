package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfclient"
)

// TestReleaseBarrierWaitsForEveryProcess: the go file appears only once
// every process said ready; a process that exits before saying ready
// (it failed) releases the others at once instead of leaving them
// waiting.
func TestReleaseBarrierWaitsForEveryProcess(t *testing.T) {
	dir := t.TempDir()
	released := make(chan error, 1)
	go func() { released <- releaseBarrier(context.Background(), dir, 2, nil) }()
	ready := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, perfclient.ReadyFilePrefix+name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ready("1")
	select {
	case err := <-released:
		t.Fatalf("released with one of two ready: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	ready("2")
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, perfclient.GoFile)); err != nil {
		t.Fatalf("no go file after release: %v", err)
	}

	dir = t.TempDir()
	exited := make(chan struct{}, 1)
	exited <- struct{}{}
	if err := releaseBarrier(context.Background(), dir, 3, exited); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, perfclient.GoFile)); err != nil {
		t.Fatalf("a process exited before ready: no go file (%v)", err)
	}
}
