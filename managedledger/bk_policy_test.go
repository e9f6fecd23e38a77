package managedledger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
)

// TestBKLedgerPolicy: Config.LedgerPolicy (a namespace's persistence
// policies and bookie affinity groups) decides each new ledger's quorums
// and groups, asked with the managed ledger's name.
func TestBKLedgerPolicy(t *testing.T) {
	e := newBKEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	policy := LedgerPolicy{EnsembleSize: 2, WriteQuorum: 2, AckQuorum: 2}
	var asked []string
	f := e.factory(t, Config{LedgerPolicy: func(_ context.Context, name string) (LedgerPolicy, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, name)
		return policy, nil
	}})
	if _, err := f.Open(ctx, "t/ns/persistent/a"); !errors.Is(err, ledger.ErrNotEnoughBookies) || !strings.Contains(err.Error(), "need 2") {
		t.Fatalf("open with E=2 over one bookie: %v, want ErrNotEnoughBookies (the policy's ensemble)", err)
	}
	if _, err := registry.UpdateRackMap(ctx, e.meta.NewSession(), func(m registry.RackMap) error {
		m["g"] = map[string]registry.RackInfo{e.bk.ID: {Rack: "/r/1"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	policy = LedgerPolicy{BookieGroups: []string{"g"}, MarkDeleteRate: 4}
	mu.Unlock()
	var ml ManagedLedger
	deadline := time.Now().Add(5 * time.Second)
	for { // until the ledger client has seen the rack map
		var err error
		if ml, err = f.Open(ctx, "t/ns/persistent/b"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ml.(*bkLedger).persistInterval(); got != 250*time.Millisecond {
		t.Fatalf("persist interval %v, want the policy's 4/s", got)
	}
	p := addWait(t, ml, "x")
	cl, _ := ledgertest.Client(t, e.meta, e.tr)
	md, err := cl.ReadMetadata(ctx, p.LedgerID)
	if err != nil {
		t.Fatal(err)
	}
	if string(md.Custom[ledger.AffinityGroupsKey]) != "g" || md.EnsembleSize != 1 {
		t.Fatalf("ledger %d: custom %v, E=%d; want groups g and the factory's E=1", p.LedgerID, md.Custom, md.EnsembleSize)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) < 2 || asked[0] != "t/ns/persistent/a" || asked[len(asked)-1] != "t/ns/persistent/b" {
		t.Fatalf("policy asked for %v", asked)
	}
}
