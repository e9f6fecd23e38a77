package managedledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestBKRefusesNamesOutsideTheLayout: the factory stores a managed
// ledger's node at tenant/namespace/persistent/local with its cursors as
// children, so a name with another shape would read another topic's node
// as its own or take it for a cursor. Opening t/ns/persistent/a after
// t/ns/persistent/a/b read b as a cursor of a and rewrote a/b's ledger
// list (3 entries became 0). Every such name is refused with
// ErrInvalidName, and the topic's data stays.
func TestBKRefusesNamesOutsideTheLayout(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	f := env.factory(t, Config{})
	bad := []string{"t/ns/persistent/a/b", "t/ns/persistent", "t/ns/a", "t/ns/non-persistent/a", "t//persistent/a",
		"t/ns/persistent/", "/t/ns/persistent/a", "t/../persistent/a", "t/ns/persistent/..", "t/ns/persistent/.", "a", "",
		"t/c/persistent/persistent/a", "t/c/non-persistent/persistent/a", "t/c/ns/persistent/a/b", "t/c//persistent/a"}
	for _, name := range bad {
		if ml, err := f.Open(ctx, name); !errors.Is(err, ErrInvalidName) {
			if ml != nil {
				ml.Close(ctx)
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidName", name, err)
		}
		if err := f.Delete(ctx, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	// The sequence, on a valid name beside an invalid one.
	a, err := f.Open(ctx, "t/ns/persistent/a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		addWait(t, a, fmt.Sprint(i))
	}
	if _, err := f.Open(ctx, "t/ns/persistent/a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("nested name opened: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	a, err = f.Open(ctx, "t/ns/persistent/a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if n := a.Entries(); n != 3 {
		t.Fatalf("%d entries after the nested open, want 3", n)
	}
	if len(a.Cursors()) != 0 {
		t.Fatalf("cursors %v appeared", a.Cursors())
	}
}

// TestBKV1NamesBesideV2: a legacy (v1) topic's ledger,
// property/cluster/namespace/persistent/local, lives beside the v2 topics
// of namespace property/cluster without either reading the other's node.
func TestBKV1NamesBesideV2(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	f := env.factory(t, Config{})
	names := map[string]int{"t/c/persistent/n": 2, "t/c/n/persistent/x": 3, "t/c/persistent/x": 1}
	for name, n := range names {
		ml, err := f.Open(ctx, name)
		if err != nil {
			t.Fatalf("Open(%q): %v", name, err)
		}
		for i := range n {
			addWait(t, ml, fmt.Sprint(i))
		}
		if err := ml.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, n := range names {
		ml, err := f.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := ml.Entries(); got != int64(n) || len(ml.Cursors()) != 0 {
			t.Errorf("%s: %d entries, cursors %v; want %d and none", name, got, ml.Cursors(), n)
		}
		ml.Close(ctx)
	}
}
