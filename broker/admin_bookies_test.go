package broker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// getBookies calls GET /admin/v2/bookies/all on b.
func getBookies(t *testing.T, b *Broker) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	b.HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/v2/bookies/all", nil))
	return rec.Code, rec.Body.String()
}

func bookiesBroker(t *testing.T, cluster metadata.Store) *Broker {
	t.Helper()
	b := New(Config{ClusterName: "test", ClusterMetadata: cluster, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

// TestAdminAllBookies: bookies/all lists every registered bookie, writable
// and read-only, in Pulsar's BookiesClusterInfo shape with each one's mode.
func TestAdminAllBookies(t *testing.T) {
	ctx := context.Background()
	srv := metadata.NewMemoryServer()
	brokerStore := srv.NewSession()
	b := bookiesBroker(t, brokerStore)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	if code, body := getBookies(t, b); code != http.StatusOK || body != `{"bookies":[]}` {
		t.Fatalf("no bookies: %d %s", code, body)
	}

	bookieStore := srv.NewSession()
	r1, err := registry.Register(ctx, bookieStore, registry.Registration{BookieID: "bk1:3181", Address: "bk1:3181"}, log)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := registry.Register(ctx, bookieStore, registry.Registration{BookieID: "bk2:3181", Address: "bk2:3181"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r1.Unregister(ctx) }()
	reason := bookie.OutOfSpaceReason + ": ledger directory is 96.0% full (threshold 95%)"
	if err := r2.SetMode(ctx, true, reason, true); err != nil {
		t.Fatal(err)
	}

	code, body := getBookies(t, b)
	if code != http.StatusOK {
		t.Fatalf("bookies/all: %d %s", code, body)
	}
	want := `{"bookies":[{"bookieId":"bk1:3181","readOnly":false},` +
		`{"bookieId":"bk2:3181","readOnly":true,"reason":"` + reason + `","outOfSpace":true}]}`
	if body != want {
		t.Fatalf("bookies/all:\n got %s\nwant %s", body, want)
	}
	// A Pulsar client reads bookieId and ignores the rest.
	var pulsar struct {
		Bookies []struct {
			BookieID string `json:"bookieId"`
		} `json:"bookies"`
	}
	if err := json.Unmarshal([]byte(body), &pulsar); err != nil || len(pulsar.Bookies) != 2 || pulsar.Bookies[1].BookieID != "bk2:3181" {
		t.Fatalf("as BookiesClusterInfo: %+v %v", pulsar, err)
	}

	// Back to writable: the reason goes; a bookie that stops leaves the list.
	if err := r2.SetMode(ctx, false, "", false); err != nil {
		t.Fatal(err)
	}
	if err := r1.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	if code, body := getBookies(t, b); code != http.StatusOK || body != `{"bookies":[{"bookieId":"bk2:3181","readOnly":false}]}` {
		t.Fatalf("after changes: %d %s", code, body)
	}

	// A store that is gone answers 503, as other admin endpoints do.
	if err := brokerStore.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body := getBookies(t, b); code != http.StatusServiceUnavailable || !strings.Contains(body, `"reason"`) {
		t.Fatalf("closed store: %d %s", code, body)
	}
}

// TestAdminAllBookiesNoRegistry: a broker without the cluster's metadata
// store answers 412 with the reason, in Pulsar's error shape.
func TestAdminAllBookiesNoRegistry(t *testing.T) {
	b := bookiesBroker(t, nil)
	code, body := getBookies(t, b)
	var e struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(body), &e); code != http.StatusPreconditionFailed || err != nil ||
		!strings.Contains(e.Reason, "no cluster metadata store") {
		t.Fatalf("no registry: %d %s", code, body)
	}
}
