package managedledger

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/metadata"
)

// putHookStore runs hook once, before the first Put whose path has the
// given suffix, so a test can act between an owner's checkOwner and its
// cursor node write.
type putHookStore struct {
	metadata.Store
	suffix string
	once   sync.Once
	hook   func()
}

func (s *putHookStore) Put(ctx context.Context, path string, value []byte, version int64) (metadata.Stat, error) {
	if strings.HasSuffix(path, s.suffix) && s.hook != nil {
		s.once.Do(s.hook)
	}
	return s.Store.Put(ctx, path, value, version)
}

// TestBKCursorWriteRacingHandover (issue 16, defect 6c): the old owner
// checked it still owns the managed ledger (checkOwner), then a new owner
// opens it and recovers the cursor, then the old owner's cursor node
// write lands. The new owner must keep working: it must not find, at its
// first cursor write, that the node moved under it and fence itself. And
// the old owner's late write must not win.
func TestBKCursorWriteRacingHandover(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	const name = "public/default/persistent/handover"
	factoryOn := func(store metadata.Store) *BKFactory {
		cl, _ := ledgertest.Client(t, env.meta, env.tr)
		f, err := NewBKFactory(Config{Store: store, Ledgers: cl, Logger: ledgertest.Quiet(), MarkDeleteRate: 100})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	sessA := env.meta.NewSession()
	defer sessA.Close()
	hooked := &putHookStore{Store: sessA, suffix: "/sub"}
	a, err := factoryOn(hooked).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var ps []Position
	for _, m := range []string{"m0", "m1", "m2", "m3"} {
		ps = append(ps, addWait(t, a, m))
	}
	sessB := env.meta.NewSession()
	defer sessB.Close()
	fb := factoryOn(sessB)
	var b ManagedLedger
	opened := make(chan error, 1)
	// Armed before the cursor exists: the cursor's first snapshot is the
	// first Put of its node (it creates the cursor ledger), whether the
	// persist tick the open arms or the mark-delete's comes first. Armed
	// after the open, a tick under load wrote the node before the hook
	// and later snapshots only append to the cursor ledger.
	hooked.hook = func() { // A passed checkOwner; B takes over before A's node write lands
		var err error
		b, err = fb.Open(ctx, name)
		opened <- err
	}
	ca, err := a.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.MarkDelete(ctx, ps[1]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("new owner open: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old owner never wrote its cursor node")
	}
	cb, err := b.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if err := cb.MarkDelete(ctx, ps[2]); err != nil {
		t.Fatal(err)
	}
	waitPersisted(t, cb.(*bkCursor)) // the new owner writes its cursor node
	done := make(chan error, 1)
	b.AddEntry([]byte("after handover"), func(_ Position, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("the new owner fenced itself after the old owner's late cursor write: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close new owner: %v", err)
	}
	// A third owner sees what the new owner acknowledged, not the old one's state.
	c, err := factoryOn(env.meta.NewSession()).Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.MarkDeletePosition(); got != ps[2] {
		t.Fatalf("mark-delete after the handover %v, want %v (the new owner's)", got, ps[2])
	}
}
