package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// bookiesWeb serves a broker's admin API over cluster (nil: a broker
// without the cluster's metadata store).
func bookiesWeb(t *testing.T, cluster metadata.Store) string {
	t.Helper()
	b := broker.New(broker.Config{ClusterName: "test", ClusterMetadata: cluster, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(func() {
		web.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return web.URL
}

// TestAdminBookies: bookies list-bookies shows writable and read-only
// bookies with why, as a table and as pulsar-admin's JSON.
func TestAdminBookies(t *testing.T) {
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	a := adminCLI{t, bookiesWeb(t, srv.NewSession())}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	if out := a.ok("bookies", "list-bookies"); out != "BOOKIE  MODE  OUT-OF-SPACE  REASON\n" {
		t.Fatalf("no bookies: %q", out)
	}
	if out := a.ok("bookies", "list-bookies", "--output", "json"); out != "{\n  \"bookies\": []\n}\n" {
		t.Fatalf("no bookies, json: %q", out)
	}

	bookies := srv.NewSession()
	if _, err := registry.Register(ctx, bookies, registry.Registration{BookieID: "bk1:3181", Address: "bk1:3181"}, log); err != nil {
		t.Fatal(err)
	}
	r2, err := registry.Register(ctx, bookies, registry.Registration{BookieID: "bk2:3181", Address: "bk2:3181"}, log)
	if err != nil {
		t.Fatal(err)
	}
	reason := bookie.OutOfSpaceReason + ": ledger directory is 96.0% full"
	if err := r2.SetMode(ctx, true, reason, true); err != nil {
		t.Fatal(err)
	}

	out := a.ok("bookies", "list-bookies")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[1]), " ") != "bk1:3181 writable false" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "bk2:3181 read-only true "+bookie.OutOfSpaceReason) ||
		!strings.HasSuffix(lines[2], reason) {
		t.Fatalf("list-bookies:\n%s", out)
	}
	var info bookiesClusterInfo
	a.json(&info, "bookies", "list-bookies")
	want := []rawBookieInfo{{BookieID: "bk1:3181"}, {BookieID: "bk2:3181", ReadOnly: true, Reason: reason, OutOfSpace: true}}
	if len(info.Bookies) != 2 || info.Bookies[0] != want[0] || info.Bookies[1] != want[1] {
		t.Fatalf("list-bookies json: %+v", info)
	}

	// Help, usage, and a broker without a bookie registry.
	if code, out, _ := a.run("bookies", "help"); code != 0 || !strings.Contains(out, "usage: magnetar admin bookies <command>") ||
		!strings.Contains(out, "list-bookies") {
		t.Fatalf("bookies help: %d %q", code, out)
	}
	wantContains(t, "groups", a.ok(), "bookies ")
	wantContains(t, "extra argument", a.fails(2, "bookies", "list-bookies", "x"), "unexpected arguments")
	none := adminCLI{t, bookiesWeb(t, nil)}
	wantContains(t, "no registry", none.fails(1, "bookies", "list-bookies"),
		"magnetar admin bookies list-bookies: ", "no cluster metadata store", "HTTP 412")
}

func adminBookiesStandalone(a adminCLI) {
	t := a.t
	wantContains(t, "standalone's bookie", a.ok("bookies", "list-bookies"), standaloneBookieID+"  writable")
	var info bookiesClusterInfo
	a.json(&info, "bookies", "list-bookies")
	if len(info.Bookies) != 1 || info.Bookies[0] != (rawBookieInfo{BookieID: standaloneBookieID}) {
		t.Fatalf("standalone bookies: %+v", info)
	}
}

// TestAdminBookieRacks: set-bookie-rack, get-bookie-rack,
// racks-placement and delete-bookie-rack through the admin API; the map
// is stored at /bookies in Pulsar's JSON, and a ledger client placing
// region-aware picks it up for its next ledger.
func TestAdminBookieRacks(t *testing.T) {
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	a := adminCLI{t, bookiesWeb(t, srv.NewSession())}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	bookies := srv.NewSession()
	for _, id := range []string{"bk1:3181", "bk2:3181", "bk3:3181", "bk4:3181"} {
		if _, err := registry.Register(ctx, bookies, registry.Registration{BookieID: id, Address: id}, log); err != nil {
			t.Fatal(err)
		}
	}
	store := srv.NewSession()
	cl, err := ledger.New(ctx, ledger.Config{Store: store, Logger: log,
		Placement: ledger.NewPlacement(ledger.TopologyConfig{RegionAware: true, MinRacksPerWriteQuorum: 2, Enforce: true, Seed: 1, Logger: log})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	create := func() ([]string, error) {
		w, err := cl.Create(ctx, ledger.CreateOptions{EnsembleSize: 2, WriteQuorumSize: 2, AckQuorumSize: 2})
		if err != nil {
			return nil, err
		}
		return w.Metadata().Ensembles[0].Bookies, nil
	}
	if _, err := create(); !errors.Is(err, ledger.ErrNotEnoughBookies) || !strings.Contains(err.Error(), "default-region") {
		t.Fatalf("create before the rack map: %v, want ErrNotEnoughBookies naming default-region", err)
	}

	if out := a.ok("bookies", "racks-placement"); out != "GROUP  BOOKIE  RACK  HOSTNAME\n" {
		t.Fatalf("empty rack map: %q", out)
	}
	a.ok("bookies", "set-bookie-rack", "--bookie", "bk1:3181", "--rack", "/east/r1", "--hostname", "bk1.example")
	a.ok("bookies", "set-bookie-rack", "--bookie", "bk2:3181", "--rack", "/east/r2")
	a.ok("bookies", "set-bookie-rack", "--bookie", "bk3:3181", "--rack", "/west/r1", "--group", "isolated")
	a.ok("bookies", "set-bookie-rack", "--bookie", "bk4:3181", "--rack", "/west/r2")
	raw, _, err := store.Get(ctx, "/bookies")
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]map[string]map[string]string
	if err := json.Unmarshal(raw, &stored); err != nil || stored["default"]["bk1:3181"]["rack"] != "/east/r1" ||
		stored["default"]["bk1:3181"]["hostname"] != "bk1.example" || stored["isolated"]["bk3:3181"]["rack"] != "/west/r1" {
		t.Fatalf("/bookies holds %s (%v), want Pulsar's BookiesRackConfiguration", raw, err)
	}
	out := strings.Join(strings.Fields(a.ok("bookies", "racks-placement")), " ")
	wantContains(t, "racks-placement", out, "default bk1:3181 /east/r1 bk1.example", "isolated bk3:3181 /west/r1")
	var info bookieRackInfo
	a.json(&info, "bookies", "get-bookie-rack", "--bookie", "bk3:3181")
	if info.Rack != "/west/r1" {
		t.Fatalf("get-bookie-rack: %+v", info)
	}
	// A bookie moved to another group leaves its first one.
	a.ok("bookies", "set-bookie-rack", "--bookie", "bk3:3181", "--rack", "/west/r1")
	var racks map[string]map[string]bookieRackInfo
	a.json(&racks, "bookies", "racks-placement")
	if _, ok := racks["isolated"]; ok || racks["default"]["bk3:3181"].Rack != "/west/r1" {
		t.Fatalf("after moving bk3 to default: %+v", racks)
	}
	wantContains(t, "bad rack", a.fails(1, "bookies", "set-bookie-rack", "--bookie", "bk1:3181", "--rack", "east"), "HTTP 400")
	wantContains(t, "missing flags", a.fails(2, "bookies", "set-bookie-rack", "--bookie", "bk1:3181"), "--rack are required")

	// The ledger client places the next ledger by the map.
	region := map[string]string{"bk1:3181": "east", "bk2:3181": "east", "bk3:3181": "west", "bk4:3181": "west"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ens, err := create()
		if err == nil {
			if region[ens[0]] == region[ens[1]] {
				t.Fatalf("ensemble %v in one region", ens)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rack map did not reach the ledger client: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	a.ok("bookies", "delete-bookie-rack", "--bookie", "bk1:3181")
	wantContains(t, "deleted", a.fails(1, "bookies", "get-bookie-rack", "--bookie", "bk1:3181"), "HTTP 404")
	wantContains(t, "delete again", a.fails(1, "bookies", "delete-bookie-rack", "--bookie", "bk1:3181"), "HTTP 404")
	none := adminCLI{t, bookiesWeb(t, nil)}
	wantContains(t, "no store", none.fails(1, "bookies", "racks-placement"), "HTTP 412")
}
