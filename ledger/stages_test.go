package ledger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/internal/stage"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// stageTotals is how many observations stage name has in r and their sum
// in seconds.
func stageTotals(t *testing.T, r *stage.Recorder, name string) (count uint64, sum float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == name {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// An add's wait for the in-process bookie's add goroutine is timed as
// bookie_queue: adds queued behind one that holds the goroutine wait as
// long as it does; other requests are not timed.
func TestLocalTransportTimesTheWaitForTheAddGoroutine(t *testing.T) {
	const hold = 30 * time.Millisecond
	rec := stage.NewRecorder()
	b := &gateBookie{gate: make(chan struct{})}
	tr := NewLocalTransport()
	defer tr.Close()
	tr.RecordStages(rec)
	tr.Add("b", b)
	a, read := sendAddsThenRead(t, tr, "b", 3)
	time.Sleep(hold)
	close(b.gate)
	a.wait(t)
	read.wait(t)
	count, sum := stageTotals(t, rec, "bookie_queue")
	if count != 3 {
		t.Fatalf("bookie_queue has %d observations, want one per add (3)", count)
	}
	// The second and third adds waited for the first, which waited for
	// the gate.
	if sum < 2*hold.Seconds() {
		t.Fatalf("bookie_queue sums %.3f s, want at least %.3f s (two adds behind one held %v)", sum, 2*hold.Seconds(), hold)
	}
}

// The wait from the quorum's acknowledgement to an append's callback is
// timed as ledger_deliver: callbacks run one at a time in entry order, so
// entries acknowledged while an earlier callback runs wait for it.
func TestDeliverTimesTheWaitForEarlierCallbacks(t *testing.T) {
	const hold = 40 * time.Millisecond
	rec := stage.NewRecorder()
	c := newCluster(t, 3, 7)
	ctx := context.Background()
	w, err := c.client(t, Config{Stages: rec}).Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2,
		Password: password})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(5)
	w.AppendAsync([]byte("first"), func(_ int64, err error) {
		if err != nil {
			t.Errorf("entry 0: %v", err)
		}
		time.Sleep(hold) // a slow callback holds the ledger's deliveries
		wg.Done()
	})
	for range 4 {
		w.AppendAsync([]byte("next"), func(_ int64, err error) {
			if err != nil {
				t.Errorf("append: %v", err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	count, sum := stageTotals(t, rec, "ledger_deliver")
	if count != 5 {
		t.Fatalf("ledger_deliver has %d observations, want one per entry (5)", count)
	}
	// Entries 1-4 are acknowledged within the first callback's hold (the
	// bookies are in memory); allow for a slow runner by asking for three.
	if sum < 3*hold.Seconds()*0.75 {
		t.Fatalf("ledger_deliver sums %.3f s, want at least %.3f s (entries behind a callback held %v)", sum, 3*hold.Seconds()*0.75, hold)
	}
	if n, _ := stageTotals(t, rec, "ledger_add"); n != 5 {
		t.Fatalf("ledger_add has %d observations, want 5", n)
	}
}

// Timing the adds' queue costs Send no allocation: the add's task is one
// closure with the timing or without.
func TestTimedLocalSendAllocatesNoMore(t *testing.T) {
	allocs := func(rec *stage.Recorder) float64 {
		tr := NewLocalTransport()
		defer tr.Close()
		tr.RecordStages(rec)
		tr.Add("b", okBookie{})
		done := make(chan struct{}, 1)
		cb := func(*bkproto.Response, error) { done <- struct{}{} }
		req := &bkproto.Request{Op: bkproto.OpAdd, LedgerID: 1}
		return testing.AllocsPerRun(200, func() {
			tr.Send("b", req, cb)
			<-done
		})
	}
	plain, timed := allocs(nil), allocs(stage.NewRecorder())
	if timed > plain {
		t.Fatalf("a timed add allocates %.1f times per Send, an untimed one %.1f: want no more", timed, plain)
	}
}

// okBookie answers every request at once with StatusOK.
type okBookie struct{}

func (okBookie) Handle(r *bkproto.Request, reply func(*bkproto.Response)) {
	reply(&bkproto.Response{Op: r.Op, RequestID: r.RequestID, Status: bkproto.StatusOK})
}
