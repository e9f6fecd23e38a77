package chaos

import (
	"strings"
	"testing"
	"time"
)

// A run passes its scenario's bound on either quorum class, and the
// report's bound cell says whether every run kept it.
func TestBounds(t *testing.T) {
	b := &Bound{Spare: time.Second, NoSpare: 2 * time.Second}
	cases := []struct {
		spare, noSpare time.Duration
		over           bool
	}{
		{900 * time.Millisecond, 2 * time.Second, false},
		{1100 * time.Millisecond, 0, true},
		{0, 2100 * time.Millisecond, true},
	}
	for _, c := range cases {
		got := b.check(Verdict{UnavailableSpare: c.spare, UnavailableNoSpare: c.noSpare})
		if (got != "") != c.over {
			t.Errorf("spare %s, no spare %s: %q, want over %v", c.spare, c.noSpare, got, c.over)
		}
	}
	if got := (*Bound)(nil).check(Verdict{UnavailableSpare: time.Hour}); got != "" {
		t.Errorf("no bound: %q", got)
	}
	row := &Row{Scenario: &Scenario{Name: "x", Bound: b}, Spare: []time.Duration{time.Second}, NoSpare: []time.Duration{3 * time.Second}}
	if cell := boundCell(row); !strings.Contains(cell, "exceeded") {
		t.Errorf("bound cell %q for a run past the bound", cell)
	}
	row.NoSpare = []time.Duration{time.Second}
	if cell := boundCell(row); !strings.Contains(cell, "kept") {
		t.Errorf("bound cell %q for runs within the bound", cell)
	}
}

// A cluster that cannot start returns the error (it panicked closing a
// nil cluster when ZooKeeper was missing), and says so before it touches
// the lab: a unit test run beside the fault suite once tore down the
// suite's running cluster this way.
func TestStartClusterFailureReturnsTheError(t *testing.T) {
	c, err := StartCluster(Options{Dir: t.TempDir(), ZKJar: "/nonexistent/zookeeper.jar"})
	if err == nil || c != nil {
		t.Fatalf("StartCluster without ZooKeeper: %v, %v", c, err)
	}
	if !strings.Contains(err.Error(), "ZooKeeper missing") {
		t.Errorf("error %q does not name the missing ZooKeeper", err)
	}
}
