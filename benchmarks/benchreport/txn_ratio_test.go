package main

import "testing"

// A miss never reads as the target: 0.699 is printed with three decimals.
func TestTxnRatioText(t *testing.T) {
	for r, want := range map[float64]string{0.699: "0.699", 0.6951: "0.695", 0.7: "0.70", 0.712: "0.71", 0.64: "0.64", 0.6949: "0.69"} {
		if got := txnRatioText(r); got != want {
			t.Errorf("txnRatioText(%v) = %q, want %q", r, got, want)
		}
	}
}
