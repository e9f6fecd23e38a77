package managedledger

// A full disk (issue 30): a bookie refusing adds while placement still
// takes it (its registration not yet read-only) made every failed add
// roll over at once, 214 new ledgers in 2.4 s, each with metadata and
// journal writes that used the last megabytes.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest/fault"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// diskFull, injected into a fault.Transport, answers every add but a
// recovery add StatusReadOnly, as a bookie whose disk filled before its
// registration said so; reads go on.
var diskFull = fault.Fault{Op: bkproto.OpAdd, Action: fault.Refuse, Status: bkproto.StatusReadOnly,
	Match: func(_ string, req *bkproto.Request) bool { return req.Flags&bkproto.FlagRecoveryAdd == 0 }}

// ledgerCount is the number of ledgers in metadata.
func ledgerCount(t *testing.T, store metadata.Store) int {
	t.Helper()
	ids, err := listLedgerIDs(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// ledgersCreated is the number of ledger ids handed out so far.
func ledgersCreated(t *testing.T, store metadata.Store) int {
	t.Helper()
	b, _, err := store.Get(context.Background(), ledger.LedgersPath+"/idgen")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("idgen %q: %v", b, err)
	}
	return n
}

// ledgerIDs is the managed ledger's list.
func (ml *bkLedger) ledgerIDs() []int64 {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	var ids []int64
	for _, l := range ml.mu.ledgers {
		ids = append(ids, l.meta.ID)
	}
	return ids
}

// listLedgerIDs walks /ledgers (ledger.Path's hierarchy) for leaf nodes.
func listLedgerIDs(ctx context.Context, store metadata.Store) ([]string, error) {
	var out []string
	var walk func(p string) error
	walk = func(p string) error {
		kids, err := store.Children(ctx, p)
		if errors.Is(err, metadata.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		base := p[strings.LastIndexByte(p, '/')+1:]
		if len(kids) == 0 && len(base) == 20 && base[0] == 'L' {
			out = append(out, p)
		}
		for _, k := range kids {
			if k == "idgen" || k == "INSTANCEID" || k == "LAYOUT" || k == "underreplication" {
				continue
			}
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk("/ledgers")
}

// TestBKFullDiskNoLedgerStorm: adds that keep failing (the owner resuming
// after each, as the broker does) must not create ledgers at the rate of
// failures (before: one add on a full disk created 536 ledgers in 2 s and
// never called back); the ledgers that got nothing are not left in
// metadata; once the bookie takes adds again, writes resume on their own
// and every acknowledged add is in the stream.
func TestBKFullDiskNoLedgerStorm(t *testing.T) {
	env := newBKEnv(t)
	ctx := context.Background()
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{FailureBackoff: 20 * time.Millisecond, FailureBackoffMax: 200 * time.Millisecond})
	ml, err := f.Open(ctx, "public/default/persistent/full-disk")
	if err != nil {
		t.Fatal(err)
	}
	store := env.meta.NewSession()
	defer store.Close()
	before, createdBefore := ledgerCount(t, store), ledgersCreated(t, store)
	full := ft.Inject(diskFull)
	var acked []string
	failures := 0
	end := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		data := "m" + strconv.Itoa(i)
		select {
		case r := <-addAsync(ml, data):
			if r.err == nil {
				acked = append(acked, data)
				continue
			}
			failures++
			ml.ResumeAdds()
		case <-time.After(time.Until(end) + time.Second):
			t.Fatalf("add %s on a full disk pending for more than 1 s past the window", data)
		}
	}
	created, left := ledgersCreated(t, store)-createdBefore, ledgerCount(t, store)-before
	t.Logf("%d failed adds in 2 s; %d ledgers created, %d left in metadata", failures, created, left)
	if failures == 0 {
		t.Fatal("no add failed on a full disk")
	}
	// With backoff capped at 200 ms, 2 s leave room for about 15 ledgers.
	if created > 20 {
		t.Errorf("%d ledgers created in 2 s of failed adds: no backoff", created)
	}
	if left > 1 {
		t.Errorf("%d ledgers left behind after 2 s of failed adds: empty ledgers must be deleted", left)
	}
	if n := len(ml.(*bkLedger).ledgerIDs()); n > 1 {
		t.Errorf("managed ledger lists %d ledgers after failed adds", n)
	}
	ft.Remove(full)
	start := time.Now()
	for {
		r := await(t, addAsync(ml, "after"), "add once space is free")
		if r.err == nil {
			acked = append(acked, "after")
			break
		}
		ml.ResumeAdds()
		if time.Since(start) > 5*time.Second {
			t.Fatalf("writes did not resume: %v", r.err)
		}
	}
	t.Logf("writes resumed %v after space was freed", time.Since(start))
	c, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); strings.Join(got, ",") != strings.Join(acked, ",") {
		t.Fatalf("stream %v, acknowledged %v", got, acked)
	}
}

// TestBKFailedAddIsRetriedBoundedly: one add on a full disk is appended
// again to a few new ledgers (a bookie may have failed alone), then fails
// naming the cause, instead of rolling over for as long as the disk stays
// full (before: it never called back).
func TestBKFailedAddIsRetriedBoundedly(t *testing.T) {
	env := newBKEnv(t)
	ft := fault.NewTransport(env.tr)
	f, _ := env.factoryOver(t, ft, nil, Config{FailureBackoff: 10 * time.Millisecond, FailureBackoffMax: 50 * time.Millisecond})
	ml, err := f.Open(context.Background(), "public/default/persistent/full-disk-one-add")
	if err != nil {
		t.Fatal(err)
	}
	ft.Inject(diskFull)
	select {
	case r := <-addAsync(ml, "m0"):
		if r.err == nil {
			t.Fatalf("add on a full disk stored at %v", r.p)
		}
		if !errors.Is(r.err, client.ErrReadOnly) {
			t.Errorf("the add's error does not name the read-only bookie: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an add on a full disk did not fail within 5 s")
	}
}
