package managedledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/magnetar-io/magnetar/metadata"
)

// ledgerIDsOf reads every ledger a managed ledger's metadata names: its
// own and its cursors'.
func ledgerIDsOf(t *testing.T, store metadata.Store, name string) []int64 {
	t.Helper()
	ctx := context.Background()
	raw, _, err := store.Get(ctx, mlPath(name))
	if err != nil {
		t.Fatal(err)
	}
	var md mlMetadata
	if err := json.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, lm := range md.Ledgers {
		ids = append(ids, lm.ID)
	}
	kids, err := store.Children(ctx, mlPath(name))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		raw, _, err := store.Get(ctx, cursorPath(name, k))
		if err != nil {
			t.Fatal(err)
		}
		var node cursorNode
		if err := json.Unmarshal(raw, &node); err != nil {
			t.Fatal(err)
		}
		if node.CursorLedger > 0 {
			ids = append(ids, node.CursorLedger)
		}
	}
	return ids
}

func TestBKDeleteRemovesMetadataAndLedgers(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	f := env.factory(t, Config{MaxEntriesPerLedger: 3})
	name := "public/default/persistent/doomed"
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	c, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, c)
	if err := c.MarkDelete(ctx, ml.LastConfirmed()); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil { // persists the cursor: its node names a cursor ledger
		t.Fatal(err)
	}
	if ml, err = f.Open(ctx, name); err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "last")
	ids := ledgerIDsOf(t, f.cfg.Store, name)
	if len(ids) < 3 {
		t.Fatalf("want several ledgers and a cursor ledger before the delete, got %v", ids)
	}

	if err := f.Delete(ctx, name); err != nil { // closes the open instance itself
		t.Fatal(err)
	}
	if _, _, err := f.cfg.Store.Get(ctx, mlPath(name)); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("managed ledger node after delete: %v", err)
	}
	for _, id := range ids {
		if ok, err := f.cfg.Ledgers.LedgerExists(ctx, id); err != nil || ok {
			t.Fatalf("ledger %d after delete: exists=%v err=%v", id, ok, err)
		}
	}
	if names, err := f.List(ctx, "public/default/persistent/"); err != nil || slices.Contains(names, name) {
		t.Fatalf("List after delete: %v %v", names, err)
	}
	ml.AddEntry([]byte("x"), func(_ Position, err error) {
		if err == nil {
			t.Error("the closed instance accepted an add after the delete")
		}
	})

	again, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if again.Entries() != 0 || len(again.Cursors()) != 0 {
		t.Fatalf("reopened after delete: %d entries, %d cursors", again.Entries(), len(again.Cursors()))
	}
	c2, err := again.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, again, "fresh")
	if got := fmt.Sprint(readAll(t, c2)); got != "[fresh]" {
		t.Fatalf("the recreated topic reads %v", got)
	}
}

func TestDeleteMissingIsNotFound(t *testing.T) {
	env := newBKEnv(t)
	factories := map[string]Deleter{"bk": env.factory(t, Config{}), "memory": NewMemoryFactory(MemoryOptions{})}
	for kind, f := range factories {
		if err := f.Delete(context.Background(), "public/default/persistent/none"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: delete of a missing managed ledger: %v, want ErrNotFound", kind, err)
		}
	}
}

func TestMemoryDeleteForgetsEntriesAndCursors(t *testing.T) {
	ctx := context.Background()
	f := NewMemoryFactory(MemoryOptions{})
	name := "public/default/persistent/m"
	ml, _ := f.Open(ctx, name)
	addWait(t, ml, "a")
	c, _ := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	done := make(chan error, 1)
	readAll(t, c)
	c.ReadEntriesOrWait(1, 1<<20, func(_ []Entry, err error) { done <- err })
	if err := f.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("a waiting read after delete: %v, want ErrClosed", err)
	}
	again, _ := f.Open(ctx, name)
	if again.Entries() != 0 || len(again.Cursors()) != 0 {
		t.Fatalf("reopened after delete: %d entries, %d cursors", again.Entries(), len(again.Cursors()))
	}
}
