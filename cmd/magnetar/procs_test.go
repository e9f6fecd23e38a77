package main

import "testing"

func TestServerProcs(t *testing.T) {
	if n, set := serverProcs("", 2); !set || n != 2+spareProcs {
		t.Fatalf("no GOMAXPROCS, 2 CPUs: %d (set %v), want %d", n, set, 2+spareProcs)
	}
	if n, set := serverProcs("2", 2); set || n != 2 {
		t.Fatalf("GOMAXPROCS=2: %d (set %v), want the runtime's 2 untouched", n, set)
	}
}
