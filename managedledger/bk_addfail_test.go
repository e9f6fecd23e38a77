package managedledger

// After a failed add the stream stores nothing later until its owner
// resumes it (issue 16, defect 3): otherwise N+1 is stored after N
// failed, and with deduplication the resend of N is dropped.

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
)

// TestBKNoAddStoredAfterAFailedOne: a write failure whose rollover fails
// (the bookie is unreachable, the failed ledger cannot be recovered)
// fails the add; once the bookie is back, a later add must still fail
// until ResumeAdds, and then go on in order.
func TestBKNoAddStoredAfterAFailedOne(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	ml, err := f.Open(ctx, "public/default/persistent/no-add-after-failed")
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "m0")
	down := ft.Inject(unreachable)
	if r := await(t, addAsync(ml, "m1"), "m1"); r.err == nil {
		t.Fatalf("add while the only bookie is unreachable succeeded at %v", r.p)
	}
	ft.Remove(down)
	if r := await(t, addAsync(ml, "m2"), "m2"); r.err == nil {
		t.Fatalf("m2 was stored at %v after m1 failed, before the owner resumed adds", r.p)
	} else if !errors.Is(r.err, ErrAddsStopped) {
		t.Fatalf("m2 after m1 failed: %v, want %v", r.err, ErrAddsStopped)
	}
	ml.ResumeAdds()
	addWait(t, ml, "m1 again")
	addWait(t, ml, "m2 again")
	c, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readAll(t, c)); got != "[m0 m1 again m2 again]" {
		t.Fatalf("stream %v", got)
	}
}

// TestBKAddsDuringFailedCallbacksFail: an add made while the failed adds
// call back (the broker's SEND of N+1 racing the failure of N) fails too;
// it must not start a rollover that stores it.
func TestBKAddsDuringFailedCallbacksFail(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{})
	ml, err := f.Open(ctx, "public/default/persistent/add-during-failure")
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "m0")
	down := ft.Inject(unreachable)
	racing := make(chan addResult, 1)
	failed := make(chan error, 1)
	ml.AddEntry([]byte("m1"), func(_ Position, err error) {
		ft.Remove(down) // a rollover started now would succeed
		ml.AddEntry([]byte("m2"), func(p Position, err error) { racing <- addResult{p, err} })
		failed <- err
	})
	if err := <-failed; err == nil {
		t.Fatal("m1 stored with the bookie unreachable")
	}
	if r := await(t, racing, "m2"); r.err == nil {
		t.Fatalf("m2, added while m1's failure called back, was stored at %v", r.p)
	}
}
