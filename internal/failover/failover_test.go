package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A nil recorder records nothing; a real one counts each step apart and
// exports one series per step.
func TestRecorder(t *testing.T) {
	var none *Recorder
	none.Observe(EnsembleChange, time.Second)
	none.Since(DeadOwnerWait, time.Now())
	if none.Count(EnsembleChange) != 0 {
		t.Fatal("nil recorder counted")
	}
	r := NewRecorder()
	r.Observe(EnsembleChange, 1500*time.Millisecond)
	r.Since(BundleAcquire, time.Now().Add(-time.Second))
	r.Since(BundleAcquire, time.Now())
	if r.Count(EnsembleChange) != 1 || r.Count(BundleAcquire) != 2 || r.Count(DeadOwnerWait) != 0 {
		t.Fatalf("counts %d %d %d", r.Count(EnsembleChange), r.Count(BundleAcquire), r.Count(DeadOwnerWait))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	if n := testutil.CollectAndCount(r.Collector()); n != int(numSteps) {
		t.Fatalf("%d series, want one per step (%d)", n, numSteps)
	}
	want := `magnetar_failover_seconds_count{step="bundle_acquire"} 2`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(""), "magnetar_failover_seconds"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("exported series lack %q: %v", want, err)
	}
}
