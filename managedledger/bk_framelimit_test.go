package managedledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// TestBKOversizedEntryFailsAlone (issue 16, defect 4): an entry no bookie
// takes fails to its caller, once; the managed ledger stays on its ledger
// and takes the next entry. Before, the ledger client counted it as a
// bookie failure, and the managed ledger rolled over and appended it
// again after every rollover, without end.
func TestBKOversizedEntryFailsAlone(t *testing.T) {
	env := newBKEnv(t)
	// The bookies behave as with BookKeeper's old default frame limit: an
	// add over it never arrives, the connection breaks.
	const limit = 5<<20 + 1<<10
	tr := fault.NewTransport(env.tr)
	overLimit := tr.Inject(fault.Fault{Op: bkproto.OpAdd, Action: fault.Fail,
		Match: func(_ string, req *bkproto.Request) bool { return len(req.Data) > limit },
		Err:   fmt.Errorf("%w: frame over the bookie's limit", client.ErrDisconnected)})
	store := env.meta.NewSession()
	t.Cleanup(func() { store.Close() })
	cl, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: tr, Logger: ledgertest.Quiet(), AddTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f, err := NewBKFactory(Config{Store: store, Ledgers: cl, Logger: ledgertest.Quiet(), MarkDeleteRate: 50})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ml, err := f.Open(ctx, "public/default/persistent/big")
	if err != nil {
		t.Fatal(err)
	}
	first := addWait(t, ml, "first")
	done := make(chan error, 1)
	ml.AddEntry(bytes.Repeat([]byte("x"), 6<<20), func(_ Position, err error) { done <- err })
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an entry over every bookie's limit was stored")
		}
		if !errors.Is(err, ledger.ErrEntryTooLarge) {
			t.Fatalf("oversized add: %v, want %v", err, ledger.ErrEntryTooLarge)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("an oversized add never completed (sent %d times)", tr.Hits(overLimit))
	}
	next := addWait(t, ml, "next")
	if next.LedgerID != first.LedgerID || next.EntryID != first.EntryID+1 {
		t.Fatalf("the add after a refused one went to %v, want %v:%d (no rollover)", next, first.LedgerID, first.EntryID+1)
	}
	if n := tr.Hits(overLimit); n != 0 {
		t.Fatalf("the oversized entry was sent to bookies %d times", n)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
