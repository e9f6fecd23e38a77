// Package tracewaittest records small execution traces for tests of code
// that reads them.
package tracewaittest

import (
	"os"
	"runtime/trace"
	"testing"
)

// WriteTrace writes to file an execution trace of this process while one
// goroutine is started and waited for, so the trace holds at least one
// runnable-to-running wait.
func WriteTrace(t testing.TB, file string) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := trace.Start(f); err != nil {
		t.Fatalf("start tracing: %v", err)
	}
	done := make(chan struct{})
	go func() { close(done) }()
	<-done
	trace.Stop()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
