package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// TestLedgerSurvivesBookieKill9 runs four bookie processes on ZooKeeper
// and writes a ledger with E=3, Qw=2, Qa=2; one ensemble bookie is killed
// with SIGKILL mid-stream. Writes continue after the ensemble change, and
// after recovery by another client every acknowledged entry reads back;
// then the bookies' auditor and workers re-replicate the dead bookie's
// replicas, and everything reads back again from the new ensembles.
func TestLedgerSurvivesBookieKill9(t *testing.T) {
	skipProcessesIfShort(t)
	zk := zktest.StartForTest(t, 1)
	conn := zk.Connection + "/cluster"
	dir := t.TempDir()
	conf := filepath.Join(dir, "bk_server.conf")
	if err := os.WriteFile(conf, []byte("zkTimeout=2000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	procs := map[string]*bookieProcess{}
	for i := range 4 {
		port := freePort(t)
		d := filepath.Join(dir, fmt.Sprintf("b%d", i))
		p := startBookieProcess(t, "--config", conf, "--metadata-store", conn, "--journal-dirs", d+"/journal",
			"--ledger-dirs", d+"/ledgers", "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
			"--bookie-port", strconv.Itoa(port), "--http-port", strconv.Itoa(freePort(t)), "--io-backend", "std")
		procs["127.0.0.1:"+strconv.Itoa(port)] = p
	}
	for _, p := range procs {
		p.waitReady(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newClient := func() *ledger.Client {
		store, err := metadata.Open(ctx, conn, metadata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		cl, err := ledger.New(ctx, ledger.Config{Store: store, AddTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	waitBookies(t, newClient(), 4)
	w, err := newClient().Create(ctx, ledger.CreateOptions{EnsembleSize: 3, WriteQuorumSize: 2, AckQuorumSize: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[int64]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	victim := w.Metadata().Ensembles[0].Bookies[0]
	const total = 6000
	for i := int64(0); i < total; i++ {
		if i == total/3 {
			procs[victim].kill()
		}
		sem <- struct{}{}
		wg.Add(1)
		w.AppendAsync(processPayload(i), func(id int64, err error) {
			if err == nil {
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
			<-sem
			wg.Done()
		})
	}
	wg.Wait()
	md := w.Metadata()
	if len(acked) != total {
		t.Fatalf("%d of %d appends acknowledged across the kill (ensembles %+v)", len(acked), total, md.Ensembles)
	}
	if len(md.Ensembles) < 2 {
		t.Fatalf("no ensemble change after killing %s: %+v", victim, md.Ensembles)
	}
	// The writer "dies" without closing; another client recovers.
	r, err := newClient().OpenRecover(ctx, w.ID(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	last := r.Metadata().LastEntryID
	if last < total-1 {
		t.Fatalf("recovered ledger ends at %d, but %d entries were acknowledged", last, total)
	}
	// The bookies' auditor and replication workers copy the killed bookie's
	// replicas elsewhere once its registration expired.
	deadline := time.Now().Add(90 * time.Second)
	for {
		md, err := newClient().ReadMetadata(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if !mentions(md, victim) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger still has replicas on the killed bookie %s after 90 s: %+v", victim, md.Ensembles)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err = newClient().OpenNoRecovery(ctx, w.ID(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	for first := int64(0); first <= last; first += 1000 {
		entries, err := r.Read(ctx, first, min(first+999, last))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !bytes.Equal(e.Payload, processPayload(e.EntryID)) {
				t.Fatalf("entry %d: wrong bytes", e.EntryID)
			}
		}
	}
}

func processPayload(i int64) []byte {
	return bytes.Repeat([]byte(strconv.FormatInt(i, 10)+","), 1+int(i%40))
}

func waitBookies(t *testing.T, cl *ledger.Client, n int) {
	t.Helper()
	// The client's registry watches registrations; Create fails until enough are there.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w, err := cl.Create(ctx, ledger.CreateOptions{EnsembleSize: n, WriteQuorumSize: 1, AckQuorumSize: 1, Password: []byte("probe")})
		cancel()
		if err == nil {
			w.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bookies never registered: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mentions(md *ledger.Metadata, bookieID string) bool {
	for _, f := range md.Ensembles {
		for _, b := range f.Bookies {
			if b == bookieID {
				return true
			}
		}
	}
	return false
}
