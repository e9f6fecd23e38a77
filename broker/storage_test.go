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
	if os.Getenv("MAGNETAR_BROKER_STORAGE") != "bookie" {
		return managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: maxPerLedger})
	}
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(tr) })
	lc, store := ledgertest.Client(t, meta, tr)
	if maxPerLedger <= 0 {
		maxPerLedger = 50000
	}
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MaxEntriesPerLedger: maxPerLedger,
		MinLedgerRolloverTime: 1, MarkDeleteRate: 20, Logger: ledgertest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
