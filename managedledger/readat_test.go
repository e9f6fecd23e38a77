package managedledger

import (
	"context"
	"fmt"
	"testing"
)

// ReadEntriesAt returns the stored entries at the positions asked, in
// position order, once each, across ledgers, leaving out positions that
// are not stored; uncached, it reads through the ledgers.
func TestReadEntriesAt(t *testing.T) {
	ctx := context.Background()
	for name, open := range findImpls(t, 3) {
		t.Run(name, func(t *testing.T) {
			ml, _ := open(t)
			var pos []Position
			for i := range 10 {
				pos = append(pos, addWait(t, ml, fmt.Sprint(i)))
			}
			ask := []Position{pos[7], pos[2], pos[3], pos[4], pos[2], {LedgerID: pos[9].LedgerID, EntryID: 99}, {LedgerID: 1 << 40, EntryID: 0}}
			got, err := ml.ReadEntriesAt(ctx, ask)
			if err != nil {
				t.Fatal(err)
			}
			var data []string
			for i, e := range got {
				data = append(data, string(e.Data))
				if i > 0 && got[i-1].Position.Compare(e.Position) >= 0 {
					t.Fatalf("entries out of order: %v then %v", got[i-1].Position, e.Position)
				}
			}
			if fmt.Sprint(data) != "[2 3 4 7]" {
				t.Fatalf("read %v; want [2 3 4 7] (duplicates once, unknown positions left out)", data)
			}
			if got, err := ml.ReadEntriesAt(ctx, nil); err != nil || len(got) != 0 {
				t.Fatalf("no positions: %v %v", got, err)
			}
		})
	}
}
