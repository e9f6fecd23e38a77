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
