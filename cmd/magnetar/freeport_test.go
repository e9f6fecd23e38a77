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

// TestFreePortIsOutsideTheEphemeralRange: a port from the kernel's
// ephemeral range can be taken by any process's bind(0) or outgoing
// connection between freePort and the child's bind (CI of 7 Dec: "bind:
// address already in use" for a broker of TestThreeClustersOneInstance),
// so freePort takes ports below that range, where the kernel never
// assigns one by itself.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	low, _, err := ephemeralPorts()
	if err != nil {
		t.Fatal(err)
	}
	if low <= testPortsLow {
		t.Skipf("the ephemeral range starts at %d, below the book's range: the kernel picks here", low)
	}
	for range 100 {
		if p := freePort(t); p >= low {
			t.Fatalf("freePort answered %d, inside the ephemeral range starting at %d", p, low)
		}
	}
}
