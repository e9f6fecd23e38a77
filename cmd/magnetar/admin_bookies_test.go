package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/broker"
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
