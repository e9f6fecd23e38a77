package main

import "testing"

// TestFreePortNeverAnswersAPortTwice: the processes a test starts bind their
// ports some time after freePort chose them, so a port answered twice puts
// two of them on one port (CI of 7 Dec: four bookies started, three
// registered). 1,000 draws from the ~14,000 ports bind(0) picks from repeat
// one with near certainty unless freePort remembers what it gave.
func TestFreePortNeverAnswersAPortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 1000 {
		p := freePort(t)
		if seen[p] {
			t.Fatalf("freePort answered port %d twice in %d draws", p, len(seen)+1)
		}
		seen[p] = true
	}
}
