package perfclient

import (
	"os"
	"runtime/debug"
	"slices"
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

// LoadGeneratorEnv adds madvdontneed=0 to GODEBUG, keeping what GODEBUG
// already says, and leaves an environment that sets madvdontneed alone
// (so a re-executed load generator does not re-execute again).
func TestLoadGeneratorEnv(t *testing.T) {
	for _, c := range []struct {
		env     []string
		want    []string
		changed bool
	}{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=madvdontneed=0"}, true},
		{[]string{"GODEBUG=", "A=1"}, []string{"GODEBUG=madvdontneed=0", "A=1"}, true},
		{[]string{"GODEBUG=gctrace=1"}, []string{"GODEBUG=gctrace=1,madvdontneed=0"}, true},
		{[]string{"GODEBUG=gctrace=1,madvdontneed=1"}, []string{"GODEBUG=gctrace=1,madvdontneed=1"}, false},
		{[]string{"GODEBUG=madvdontneed=0"}, []string{"GODEBUG=madvdontneed=0"}, false},
		{[]string{"XGODEBUG=madvdontneed=1"}, []string{"XGODEBUG=madvdontneed=1", "GODEBUG=madvdontneed=0"}, true},
	} {
		orig := slices.Clone(c.env)
		got, changed := LoadGeneratorEnv(c.env)
		if !slices.Equal(got, c.want) || changed != c.changed {
			t.Errorf("LoadGeneratorEnv(%q) = %q, %v; want %q, %v", c.env, got, changed, c.want, c.changed)
		}
		if !slices.Equal(c.env, orig) {
			t.Errorf("LoadGeneratorEnv changed its argument: %q, was %q", c.env, orig)
		}
		if again, more := LoadGeneratorEnv(got); more || !slices.Equal(again, got) {
			t.Errorf("LoadGeneratorEnv(%q) changes it again: %q", got, again)
		}
	}
}
