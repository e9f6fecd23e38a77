package broker

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

// TestYieldingVisitsEveryItemOnce: the pass sees each item once, in order,
// and stops when the loop breaks.
func TestYieldingVisitsEveryItemOnce(t *testing.T) {
	items := make([]int, 1000)
	for i := range items {
		items[i] = i
	}
	if got := slices.Collect(yielding(items, 64)); !slices.Equal(got, items) {
		t.Fatalf("visited %d items, want all 1000 in order", len(got))
	}
	n := 0
	for range yielding(items, 64) {
		if n++; n == 100 {
			break
		}
	}
	if n != 100 {
		t.Fatalf("loop ran %d times after breaking at 100", n)
	}
	if got := slices.Collect(yielding([]int(nil), 64)); len(got) != 0 {
		t.Fatalf("empty input gave %v", got)
	}
}

// TestYieldingLetsReadiedGoroutinesRun: on one P, a goroutine readied
// during a pass runs within a few chunks after it. A loop that
// never yields (a plain range, checked too) finishes its thousand items
// first: it is far shorter than the runtime's 10 ms preemption.
func TestYieldingLetsReadiedGoroutinesRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	items := make([]int, 1000)
	for i := range items {
		items[i] = i
	}
	firstSeen := func(pass func(func(int) bool)) int {
		var ran atomic.Bool
		seen := -1
		for i := range pass {
			if i == 0 {
				go ran.Store(true)
			}
			if seen < 0 && ran.Load() {
				seen = i
			}
		}
		for !ran.Load() {
			runtime.Gosched()
		}
		return seen
	}
	// Within a few chunks, not the first: one schedule in 61 takes the
	// global run queue first, where Gosched put the pass itself.
	if seen := firstSeen(yielding(items, 64)); seen < 0 || seen > 4*64 {
		t.Fatalf("the readied goroutine ran at item %d of a yielding pass, want within its first four chunks", seen)
	}
	plain := func(yield func(int) bool) {
		for _, it := range items {
			if !yield(it) {
				return
			}
		}
	}
	if seen := firstSeen(plain); seen >= 0 {
		t.Fatalf("premise: the goroutine ran at item %d of a loop that never yields", seen)
	}
}
