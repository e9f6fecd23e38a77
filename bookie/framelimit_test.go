package bookie

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// TestOversizedAddAnsweredAlone (issue 16, defect 4): an add whose frame
// is over the bookie's limit is refused on its own; the adds pipelined
// around it on the same connection (other ledgers' too) succeed, and the
// connection stays open. Before, the bookie closed the connection, failing
// every request on it.
func TestOversizedAddAnsweredAlone(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{MaxFrameSize: 64 << 10})
	big := strings.Repeat("x", 100<<10)
	reqs := []*bkproto.Request{
		{Op: bkproto.OpAdd, LedgerID: 1, EntryID: 0, MasterKey: testKey, Data: entry(1, 0, -1, "before")},
		{Op: bkproto.OpAdd, LedgerID: 2, EntryID: 0, MasterKey: testKey, Data: entry(2, 0, -1, big)},
		{Op: bkproto.OpAdd, LedgerID: 3, EntryID: 0, MasterKey: testKey, Data: entry(3, 0, -1, "after")},
	}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		tb.cl.Send(r, func(_ *bkproto.Response, err error) { errs[i] = err; wg.Done() })
	}
	wg.Wait()
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("adds next to an oversized one failed: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil {
		t.Fatal("an add over the frame limit was stored")
	}
	assertTooLarge(t, errs[1])
	if err := tb.cl.Err(); err != nil {
		t.Fatalf("connection closed by an oversized add: %v", err)
	}
	resp, err := tb.read(3, 0)
	mustPayload(t, resp, err, "after")
	if _, err := tb.read(2, 0); err == nil {
		t.Fatal("the refused entry is readable")
	}
}

func assertTooLarge(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("oversized add: %v, want %v", err, client.ErrTooLarge)
	}
}
