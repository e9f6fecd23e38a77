package managedledger

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestRetention: consumed ledgers stay while retention keeps them and go
// when SetRetention lets them, by size and by time, on both
// implementations (two entries of two bytes per ledger).
func TestRetention(t *testing.T) {
	keepAll := Retention{Time: -1, Size: -1}
	open := map[string]func(t *testing.T) ManagedLedger{
		"bk": func(t *testing.T) ManagedLedger {
			f := newBKEnv(t).factory(t, Config{MaxEntriesPerLedger: 2, MinLedgerRolloverTime: time.Nanosecond, Retention: keepAll})
			ml, err := f.Open(context.Background(), "public/default/persistent/retained")
			if err != nil {
				t.Fatal(err)
			}
			return ml
		},
		"memory": func(t *testing.T) ManagedLedger {
			ml, _ := NewMemoryFactory(MemoryOptions{MaxEntriesPerLedger: 2}).Open(context.Background(), "public/default/persistent/retained")
			ml.SetRetention(keepAll)
			return ml
		},
	}
	for kind, openML := range open {
		t.Run(kind, func(t *testing.T) { checkRetention(t, openML(t)) })
	}
}

func checkRetention(t *testing.T, ml ManagedLedger) {
	ctx := context.Background()
	c, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var last Position
	for i := range 9 {
		last = addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	readAll(t, c)
	if err := c.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	stays := func(what string, entries int64) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // several persist-and-trim rounds
		if got := ml.Entries(); got != entries {
			t.Fatalf("%s: %d entries stored, want %d kept", what, got, entries)
		}
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d entries, %d bytes stored", what, ml.Entries(), ml.Size())
			}
		}
	}
	stays("unlimited retention", 9)
	ml.SetRetention(Retention{Time: -1, Size: 8})
	eventually("size retention of 8 bytes", func() bool { return ml.Size() <= 8 && ml.Size() > 0 })
	kept := ml.Entries()
	ml.SetRetention(Retention{Time: time.Hour, Size: -1})
	stays("an hour's retention", kept)
	ml.SetRetention(Retention{Time: time.Millisecond, Size: -1})
	eventually("a millisecond's retention", func() bool { return ml.Entries() <= 2 })
	if got := fmt.Sprint(readAll(t, c)); got != "[]" {
		t.Fatalf("the cursor rereads %v after trims", got)
	}
}
