package broker

import (
	"os"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// testLedgers is the topic storage of broker tests: the in-memory managed
// ledgers, or with MAGNETAR_BROKER_STORAGE=bookie (make test runs both)
// managed ledgers over a ledger client and an in-process bookie.
func testLedgers(t *testing.T, maxPerLedger int64) managedledger.Factory {
	t.Helper()
	return testClusterLedgers(t, maxPerLedger)()
}

// testClusterLedgers returns where each broker of an in-process cluster
// gets its topic storage: every call a factory of its own over the same
// storage (an owner view of the in-memory ledgers, or a factory over the
// same bookie and metadata), as each broker process has its own. One
// factory shared by all would hand a bundle's new owner the very managed
// ledger the old owner still has open, and the old owner's late close
// would close it.
func testClusterLedgers(t *testing.T, maxPerLedger int64) func() managedledger.Factory {
	t.Helper()
	if os.Getenv("MAGNETAR_BROKER_STORAGE") != "bookie" {
		mf := managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: maxPerLedger})
		first := true
		return func() managedledger.Factory {
			if first { // a single broker's tests see the factory itself
				first = false
				return mf
			}
			return mf.Owner()
		}
	}
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(tr) })
	if maxPerLedger <= 0 {
		maxPerLedger = 50000
	}
	return func() managedledger.Factory {
		t.Helper()
		lc, store := ledgertest.Client(t, meta, tr)
		f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MaxEntriesPerLedger: maxPerLedger,
			MinLedgerRolloverTime: 1, MarkDeleteRate: 20, Logger: ledgertest.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}
