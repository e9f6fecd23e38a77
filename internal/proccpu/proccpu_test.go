package proccpu

import (
	"testing"
	"time"
)

// TestUsedGrowsWithWork: CPU spent between two reads shows in the second.
func TestUsedGrowsWithWork(t *testing.T) {
	before, err := Used()
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := Used()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU used went from %v to %v over 50 ms of work", before, after)
	}
}
