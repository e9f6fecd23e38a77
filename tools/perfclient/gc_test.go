package perfclient

import (
	"os"
	"runtime/debug"
	"testing"
)

// The load generators' GOGC applies unless the environment sets one.
func TestSetLoadGeneratorGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	SetLoadGeneratorGC()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("GOGC=150 in the environment, GC percent %d after SetLoadGeneratorGC", got)
	}
	t.Setenv("GOGC", "") // registers the restore; then unset it
	unsetenv(t, "GOGC")
	SetLoadGeneratorGC()
	if got := debug.SetGCPercent(100); got != LoadGeneratorGCPercent {
		t.Fatalf("no GOGC in the environment: GC percent %d, want %d", got, LoadGeneratorGCPercent)
	}
}

// unsetenv removes key for the rest of the test (t.Setenv restores it).
func unsetenv(t *testing.T, key string) {
	t.Helper()
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
