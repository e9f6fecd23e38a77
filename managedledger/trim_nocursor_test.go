package managedledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// A topic without subscriptions keeps only its current ledger (and what
// retention asks for), in memory and on bookies; a subscription that has
// not acknowledged keeps everything after its position.
func TestNoSubscriptionKeepsOnlyCurrentLedger(t *testing.T) {
	ctx := context.Background()
	for name, open := range bothKinds(10, "nosub") {
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

// bothKinds opens a managed ledger in memory and on bookies, per entries
// to a ledger, rolling over as soon as a ledger is full.
func bothKinds(per int64, name string) map[string]func(t *testing.T) ManagedLedger {
	ctx := context.Background()
	return map[string]func(t *testing.T) ManagedLedger{
		"memory": func(t *testing.T) ManagedLedger {
			ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: per}).Open(ctx, "t")
			return ml
		},
		"bookie": func(t *testing.T) ManagedLedger {
			f := newBKEnv(t).factory(t, Config{MaxEntriesPerLedger: per, MinLedgerRolloverTime: time.Nanosecond})
			ml, err := f.Open(ctx, "public/default/persistent/"+name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ml.Close(ctx) })
			return ml
		},
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

// AddEntryInPlace stores the entry after the headroom, as AddEntry does,
// in memory and on bookies (where the ledger entry is encoded in the
// headroom instead of copied).
func TestAddEntryInPlace(t *testing.T) {
	ctx := context.Background()
	for name, open := range bothKinds(7, "inplace") {
		t.Run(name, func(t *testing.T) {
			ml := open(t)
			c, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
			if err != nil {
				t.Fatal(err)
			}
			const n = 30 // across rollovers, some added while one runs
			done := make(chan error, n)
			for i := range n {
				// Every third past crc32c.CombineWorthFrom: storage builds
				// its checksums from the given CRC for those.
				data := inPlaceEntry(i)
				buf := make([]byte, EntryHeadroom+len(data))
				copy(buf[EntryHeadroom:], data)
				ml.AddEntryInPlace(buf, crc32c.Of(crc32c.Checksum(buf[EntryHeadroom:])), func(_ Position, err error) { done <- err })
			}
			for range n {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for len(got) < n {
				es, err := c.ReadEntries(ctx, n, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					got = append(got, string(e.Data))
				}
			}
			for i, g := range got {
				if g != inPlaceEntry(i) {
					t.Fatalf("entry %d is %.20q... (%d bytes), want %d bytes", i, g, len(g), len(inPlaceEntry(i)))
				}
			}
		})
	}
}

func inPlaceEntry(i int) string {
	return fmt.Sprintf("e-%05d", i) + strings.Repeat("x", (i%3)*5000)
}

// A namespace policy that cannot be read stops a ledger from being
// created rather than creating it with the broker's defaults, which could
// be weaker replication than the namespace asks for (found by the fault
// suite's logs: "policy unavailable; creating the ledger with the
// broker's defaults" while a broker had lost its metadata session).
func TestUnreadableLedgerPolicyCreatesNoLedger(t *testing.T) {
	ctx := context.Background()
	f := newBKEnv(t).factory(t, Config{LedgerPolicy: func(context.Context, string) (LedgerPolicy, error) {
		return LedgerPolicy{}, errors.New("metadata store unreachable")
	}})
	ml, err := f.Open(ctx, "public/default/persistent/policy")
	if err == nil {
		ml.Close(ctx)
		t.Fatal("a managed ledger opened (and created its ledger) without its namespace's policy")
	}
	if !strings.Contains(err.Error(), "metadata store unreachable") {
		t.Errorf("error %q does not say why", err)
	}
}
