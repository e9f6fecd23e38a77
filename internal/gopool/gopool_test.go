package gopool

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every task runs once, also when many arrive at once and some block:
// Go never waits for a busy goroutine.
func TestEveryTaskRunsAndGoNeverBlocks(t *testing.T) {
	p := New(time.Second)
	release := make(chan struct{})
	var blocked sync.WaitGroup
	for range 50 {
		blocked.Add(1)
		p.Go(func() { defer blocked.Done(); <-release })
	}
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); ran.Add(1) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of 1000 tasks ran while 50 others blocked", ran.Load())
	}
	close(release)
	blocked.Wait()
}

// Goroutines are reused while tasks keep coming, and end once idle for
// the linger time.
func TestGoroutinesAreReusedThenEnd(t *testing.T) {
	base := runtime.NumGoroutine()
	p := New(time.Second)
	ids := map[string]bool{}
	for range 200 {
		id := make(chan string)
		p.Go(func() { id <- goroutineID() })
		ids[<-id] = true
		time.Sleep(time.Millisecond) // the worker is back waiting
	}
	if len(ids) > 3 {
		t.Fatalf("200 tasks one at a time ran on %d goroutines, want the pool to reuse one", len(ids))
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after the linger time", runtime.NumGoroutine()-base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goroutineID is the running goroutine's number from its stack header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	return f[1]
}

// Close ends the idle goroutines at once (a closed transport must not
// keep grown stacks for the linger time), lets a running task finish,
// and Go still runs tasks afterwards.
func TestCloseEndsIdleGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	p := New(time.Hour)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); time.Sleep(10 * time.Millisecond) })
	}
	wg.Wait()
	p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after Close with an hour's linger", runtime.NumGoroutine()-base)
		}
		time.Sleep(time.Millisecond)
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a task given after Close did not run")
	}
	p.Close() // twice is fine
}
