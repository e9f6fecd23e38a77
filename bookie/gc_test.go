package bookie

import (
	"context"
	"errors"
	"testing"

	"github.com/magnetar-io/magnetar/bookie/client"
)

type setOracle map[int64]bool

func (s setOracle) LedgerExists(_ context.Context, id int64) (bool, error) {
	if id == 666 {
		return false, errors.New("metadata unreachable")
	}
	return s[id], nil
}

func TestCollectGarbage(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	for _, l := range []int64{1, 2, 3} {
		if err := tb.add(l, 0, -1, "x", 0); err != nil {
			t.Fatal(err)
		}
	}
	n, err := tb.core.CollectGarbage(context.Background(), setOracle{2: true})
	if err != nil || n != 2 {
		t.Fatalf("gc: deleted %d, %v; want 2", n, err)
	}
	if _, err := tb.read(1, 0); !errors.Is(err, client.ErrNoLedger) {
		t.Fatalf("read of a collected ledger: %v", err)
	}
	// A zombie writer of a deleted ledger is refused, not silently dropped.
	if err := tb.add(1, 1, 0, "late", 0); !errors.Is(err, client.ErrNoLedger) {
		t.Fatalf("add to a deleted ledger: %v, want ErrNoLedger", err)
	}
	resp, err := tb.read(2, 0)
	mustPayload(t, resp, err, "x")
	// An oracle failure deletes nothing it could not check.
	if err := tb.add(666, 0, -1, "y", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.core.CollectGarbage(context.Background(), setOracle{2: true}); err == nil {
		t.Fatal("gc ignored an oracle failure")
	}
	resp, err = tb.read(666, 0)
	mustPayload(t, resp, err, "y")
}
