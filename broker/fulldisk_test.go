package broker

// Full disks (issue 30): a producer's send fails with Pulsar's answer for
// a cluster without writable bookies, naming the cause, and writes resume
// without a restart once space is freed.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// fullBookie is one in-process bookie whose disk the test fills: adds are
// answered StatusReadOnly and its registration says out of space, as the
// bookie's disk checker does.
type fullBookie struct {
	inner ledger.Transport
	store metadata.Store
	full  atomic.Bool
}

func (f *fullBookie) Send(id string, req *bkproto.Request, cb client.Callback) {
	if f.full.Load() && req.Op == bkproto.OpAdd && req.Flags&bkproto.FlagRecoveryAdd == 0 { // as a read-only bookie
		resp := &bkproto.Response{Op: req.Op, Status: bkproto.StatusReadOnly, RequestID: req.RequestID, LedgerID: req.LedgerID, EntryID: req.EntryID}
		go cb(resp, client.StatusError(resp.Status))
		return
	}
	f.inner.Send(id, req, cb)
}

// setFull fills or frees the disk and publishes the mode.
func (f *fullBookie) setFull(t *testing.T, full bool) {
	t.Helper()
	f.full.Store(full)
	reg := registry.Registration{BookieID: "b", Address: "b", ReadOnly: full, OutOfSpace: full}
	if full {
		reg.ReadOnlyReason = bookie.OutOfSpaceReason + ": ledger directory /ledgers is 96.0% full"
	}
	b, _ := json.Marshal(reg)
	if _, err := f.store.Put(context.Background(), registry.AvailablePath+"/b", b, -1); err != nil {
		t.Fatal(err)
	}
}

func fullDiskLedgers(t *testing.T) (managedledger.Factory, *fullBookie) {
	t.Helper()
	meta, local := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, local, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(local) })
	store := meta.NewSession()
	fb := &fullBookie{inner: local, store: store}
	lc, err := ledger.New(context.Background(), ledger.Config{Store: store, Transport: fb, Logger: ledgertest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(); store.Close() })
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MarkDeleteRate: 20, Logger: ledgertest.Quiet(),
		FailureBackoff: 20 * time.Millisecond, FailureBackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f, fb
}

// TestFullDiskSendErrorNamesCause: on a full disk the SEND fails with
// PersistenceError saying no writable bookie is left because they are
// out of disk space (Pulsar: "Not enough non-faulty bookies available");
// once space is freed the reconnected producer stores again.
func TestFullDiskSendErrorNamesCause(t *testing.T) {
	ledgers, fb := fullDiskLedgers(t)
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ledgers)
	url := serveTestBroker(t, b)
	const topic = "persistent://public/default/full-disk"
	r := dialRaw(t, url)
	r.connect()
	r.producerAgain(topic, 1)
	r.rawSend(1, 0)
	if cmd, _ := r.answerTo(0); cmd.GetType() != pb.BaseCommand_SEND_RECEIPT {
		t.Fatalf("sequence id 0: %v", cmd)
	}
	fb.setFull(t, true)
	r.rawSend(1, 1)
	cmd, _ := r.answerTo(1)
	if cmd.GetType() != pb.BaseCommand_SEND_ERROR {
		t.Fatalf("sequence id 1 on a full disk: %v", cmd)
	}
	se := cmd.GetSendError()
	t.Logf("SEND_ERROR %v: %s", se.GetError(), se.GetMessage())
	if se.GetError() != pb.ServerError_PersistenceError || !strings.HasPrefix(se.GetMessage(), "Not enough non-faulty bookies available") ||
		!strings.Contains(se.GetMessage(), "out of disk space") {
		t.Fatalf("SEND_ERROR %v %q: want PersistenceError, Not enough non-faulty bookies available, naming the full disk", se.GetError(), se.GetMessage())
	}
	ml := b.loadedTopic(mustTopicName(t, topic)).ml
	if got := storedSequenceIDs(t, ml); len(got) != 1 || got[0] != 0 {
		t.Fatalf("stream on a full disk %v: reads must go on and hold 0", got)
	}
	fb.setFull(t, false)
	start := time.Now()
	for seq := uint64(2); ; seq++ {
		r2 := dialRaw(t, url) // the client reconnects after a SEND_ERROR
		r2.connect()
		r2.producerAgain(topic, 1)
		r2.rawSend(1, seq)
		if cmd, _ := r2.answerTo(seq); cmd.GetType() == pb.BaseCommand_SEND_RECEIPT {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("writes did not resume within 10 s of space being freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes resumed %v after space was freed", time.Since(start))
}
