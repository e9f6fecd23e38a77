package managedledger

import (
	"context"
	"testing"
	"time"
)

// A topic without subscriptions keeps only its current ledger (and what
// retention asks for), in memory and on bookies; a subscription that has
// not acknowledged keeps everything after its position.
func TestNoSubscriptionKeepsOnlyCurrentLedger(t *testing.T) {
	ctx := context.Background()
	opens := map[string]func(t *testing.T) ManagedLedger{
		"memory": func(t *testing.T) ManagedLedger {
			ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 10}).Open(ctx, "t")
			return ml
		},
		"bookie": func(t *testing.T) ManagedLedger {
			f := newBKEnv(t).factory(t, Config{MaxEntriesPerLedger: 10, MinLedgerRolloverTime: time.Nanosecond})
			ml, err := f.Open(ctx, "public/default/persistent/nosub")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ml.Close(ctx) })
			return ml
		},
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			ml := open(t)
			for range 200 {
				addWait(t, ml, "e")
			}
			waitEntriesAtMost(t, ml, 20) // the current ledger, and the one just closed while its trim runs
			// A subscription at the latest position from now on holds
			// what comes after it.
			if _, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Latest}); err != nil {
				t.Fatal(err)
			}
			for range 100 {
				addWait(t, ml, "e")
			}
			time.Sleep(100 * time.Millisecond)
			if n := ml.Entries(); n < 100 {
				t.Fatalf("%d entries kept with a subscription that acknowledged none of the last 100", n)
			}
		})
	}
}

func waitEntriesAtMost(t *testing.T, ml ManagedLedger, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ml.Entries() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries kept without any subscription, want at most %d", ml.Entries(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
