package managedledger

import (
	"context"
	"fmt"
	"testing"
)

// Cursor properties are stored with the position and come back when the
// managed ledger is opened again (here by a new factory after the bookie
// restarted); a later MarkDeleteWithProperties replaces them whole.
func TestBKCursorPropertiesPersist(t *testing.T) {
	env := newBKEnvWith(t, true)
	ctx := context.Background()
	const name = "public/default/persistent/props"
	ml, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ml.OpenCursor(ctx, "pulsar.dedup", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var pos []Position
	for i := range 3 {
		pos = append(pos, addWait(t, ml, fmt.Sprintf("m%d", i)))
	}
	if err := c.MarkDeleteWithProperties(ctx, pos[0], map[string]int64{"a": 1, "b": 7}); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkDeleteWithProperties(ctx, pos[1], map[string]int64{"a": 2}); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	env.stopBookie()
	env.startBookie()
	ml2, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ml2.OpenCursor(ctx, "pulsar.dedup", CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.Properties(); fmt.Sprint(got) != "map[a:2]" || c2.MarkDeletePosition() != pos[1] {
		t.Fatalf("after reopening: properties %v at %v; want map[a:2] at %v", got, c2.MarkDeletePosition(), pos[1])
	}
}

func TestMemoryCursorProperties(t *testing.T) {
	ctx := context.Background()
	f := NewMemoryFactory(MemoryOptions{})
	ml, _ := f.Open(ctx, "t")
	c, _ := ml.OpenCursor(ctx, "pulsar.dedup", CursorOptions{Initial: Earliest})
	if c.Properties() != nil {
		t.Fatal("a new cursor has properties")
	}
	p := add(t, ml, "x")
	props := map[string]int64{"producer": 41}
	if err := c.MarkDeleteWithProperties(ctx, p, props); err != nil {
		t.Fatal(err)
	}
	props["producer"] = 0 // the cursor keeps its own copy
	_ = ml.Close(ctx)
	ml, _ = f.Open(ctx, "t")
	c, _ = ml.OpenCursor(ctx, "pulsar.dedup", CursorOptions{})
	if got := c.Properties(); got["producer"] != 41 || c.MarkDeletePosition() != p {
		t.Fatalf("properties %v at %v", got, c.MarkDeletePosition())
	}
}

// A managed ledger's own properties (the broker's topic properties) are
// kept in its metadata node: set and removed in one write, kept across a
// rollover's metadata writes, and read back by the next owner.
func TestManagedLedgerProperties(t *testing.T) {
	env := newBKEnvWith(t, true)
	ctx := context.Background()
	const name = "public/default/persistent/mlprops"
	ml, err := env.factory(t, Config{MaxEntriesPerLedger: 2}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if p := ml.Properties(); p != nil {
		t.Fatalf("a new managed ledger has properties %v", p)
	}
	if err := ml.UpdateProperties(ctx, map[string]string{"a": "1", "b": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := ml.UpdateProperties(ctx, map[string]string{"c": "3"}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // rollovers rewrite the node
		addWait(t, ml, fmt.Sprintf("m%d", i))
	}
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ml2, err := env.factory(t, Config{}).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ml2.Properties()); got != "map[b:2 c:3]" {
		t.Fatalf("after reopening: %s, want map[b:2 c:3]", got)
	}

	mem, _ := NewMemoryFactory(MemoryOptions{}).Open(ctx, "t")
	if err := mem.UpdateProperties(ctx, map[string]string{"x": "1", "y": "2"}, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(mem.Properties()); got != "map[y:2]" {
		t.Fatalf("in memory: %s, want map[y:2]", got)
	}
}
