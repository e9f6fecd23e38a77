package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// startNetBookies starts n bookies serving on loopback with sopts and
// registers them in meta under their real addresses, so a client without
// a Transport reaches them over the network.
func startNetBookies(t *testing.T, meta *metadata.MemoryServer, n int, sopts bookie.ServerOptions) {
	t.Helper()
	for i := range n {
		open := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
		core, err := bookie.OpenCore(engine.NewMem(), []string{"/journal"}, journal.Options{Logger: quietLog(), MaxFileSize: 64 << 20}, open,
			bookie.Options{Logger: quietLog(), LedgerDirs: []string{"/"}, DiskUsage: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 31, nil }})
		if err != nil {
			t.Fatal(err)
		}
		sopts.Addr, sopts.Logger = "127.0.0.1:0", quietLog()
		srv, err := bookie.Serve(core, sopts)
		if err != nil {
			t.Fatal(err)
		}
		store := meta.NewSession()
		id := fmt.Sprintf("net-bookie-%d", i)
		if _, err := registry.Register(context.Background(), store, registry.Registration{BookieID: id, Address: srv.Addr()}, quietLog()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close(context.Background()); _ = core.Close(); store.Close() })
	}
}

func netClient(t *testing.T, meta *metadata.MemoryServer, cfg Config) *Client {
	t.Helper()
	store := meta.NewSession()
	cfg.Store, cfg.Logger = store, quietLog()
	if cfg.AddTimeout == 0 {
		// Generous: a 5 MiB add under the race detector on a loaded
		// 2-core machine took over 2 s, and a timed-out add counts as a
		// bookie failure, which is not what these tests are about.
		cfg.AddTimeout = 30 * time.Second
	}
	cl, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); store.Close() })
	return cl
}

// TestOversizedAppendRefusedByWriter (issue 16, defect 4): an entry too
// large for the bookies' frame limit is refused by the
// writer before it is sent: the handle keeps working, no bookie is
// counted as failed and the ensemble stays. Before, each bookie closed
// its connection, the writer replaced them until none was left, and the
// ledger could take nothing more.
func TestOversizedAppendRefusedByWriter(t *testing.T) {
	meta := metadata.NewMemoryServer()
	startNetBookies(t, meta, 3, bookie.ServerOptions{})
	cl := netClient(t, meta, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := cl.Create(ctx, CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	largest := bytes.Repeat([]byte("s"), wire.MaxEntrySize(wire.DefaultMaxMessageSize))
	if _, err := w.Append(ctx, largest); err != nil {
		t.Fatalf("the largest entry a broker stores was refused: %v", err)
	}
	tooBig := make([]byte, bkproto.DefaultMaxFrameSize)
	if _, err := w.Append(ctx, tooBig); err == nil {
		t.Fatal("an entry over the bookies' frame limit was stored")
	} else if !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("oversized append: %v, want %v", err, ErrEntryTooLarge)
	}
	id, err := w.Append(ctx, []byte("after"))
	if err != nil {
		t.Fatalf("append after a refused entry: %v", err)
	}
	if id != 2 {
		t.Fatalf("entry after the refused one got id %d, want 2 (a refused entry takes no id)", id)
	}
	if n := len(w.Metadata().Ensembles); n != 1 {
		t.Fatalf("a refused entry changed the ensemble: %d fragments", n)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAddRefusedByBookieNotABookieFailure (issue 16, defect 4): bookies
// whose frame limit is below the client's refuse an add as too large, on
// its own. The bookie is not replaced; the handle ends (the entry took an
// id), and the client refuses such an entry itself from then on, so a
// managed ledger does not fail ledger after ledger on it.
func TestAddRefusedByBookieNotABookieFailure(t *testing.T) {
	meta := metadata.NewMemoryServer()
	startNetBookies(t, meta, 3, bookie.ServerOptions{MaxFrameSize: 64 << 10})
	cl := netClient(t, meta, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := CreateOptions{EnsembleSize: 3, WriteQuorumSize: 3, AckQuorumSize: 2, Password: []byte("p")}
	w, err := cl.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 100<<10)
	if _, err := w.Append(ctx, big); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("add over the bookies' limit: %v, want %v", err, client.ErrTooLarge)
	}
	if n := len(w.Metadata().Ensembles); n != 1 {
		t.Fatalf("a bookie refusing an add as too large was replaced: %d fragments", n)
	}
	w2, err := cl.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Append(ctx, big); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("the same add on the next ledger: %v, want %v (refused before sending)", err, ErrEntryTooLarge)
	}
	if id, err := w2.Append(ctx, []byte("small")); err != nil || id != 0 {
		t.Fatalf("small add after a refused one: id %d, %v", id, err)
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
