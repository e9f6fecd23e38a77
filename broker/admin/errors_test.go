package admin_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

func TestStatusOf(t *testing.T) {
	cases := map[error]int{
		&resources.FieldError{Field: "f", Msg: "m"}:                            400,
		fmt.Errorf("x: %w", resources.ErrNotAllowed):                           403,
		fmt.Errorf("tenant t %w", resources.ErrNotFound):                       404,
		fmt.Errorf("x %w", resources.ErrExists):                                409,
		fmt.Errorf("x %w", resources.ErrNotEmpty):                              409,
		fmt.Errorf("x %w", resources.ErrConflict):                              409,
		fmt.Errorf("x %w", resources.ErrPrecondition):                          412,
		fmt.Errorf("x %w", resources.ErrCorrupt):                               500,
		fmt.Errorf("read: %w", metadata.ErrSessionLost):                        503,
		errors.New("disk on fire"):                                             500,
		fmt.Errorf("wrapped twice: %w", fmt.Errorf("%w", resources.ErrExists)): 409,
	}
	for err, want := range cases {
		if got := admin.StatusOf(err); got != want {
			t.Errorf("StatusOf(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestWriteErrorAndJSON(t *testing.T) {
	rec := httptest.NewRecorder()
	admin.WriteError(rec, 412, `Cluster "c" not empty`)
	if rec.Code != 412 || rec.Body.String() != `{"reason":"Cluster \"c\" not empty"}` || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("WriteError: %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	rec = httptest.NewRecorder()
	admin.WriteJSON(rec, []string{"a"})
	if rec.Code != 200 || rec.Body.String() != `["a"]` {
		t.Fatalf("WriteJSON: %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	admin.WriteJSON(rec, func() {})
	if rec.Code != 500 {
		t.Fatalf("WriteJSON of a func: %d", rec.Code)
	}
}

// The routes coexist on one mux with the broker's own (copied from
// broker/http.go, broker/admin_cluster.go and broker/schema/http.go):
// ServeMux panics on overlapping patterns.
func TestRoutesCoexistWithBrokerRoutes(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	for _, p := range []string{
		"GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
		"GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions",
		"PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions",
		"GET /status.html",
		"GET /admin/v2/brokers/{cluster}",
		"GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces",
		"GET /admin/v2/broker-stats/load-report",
		"PUT /admin/v2/namespaces/{tenant}/{namespace}/unload",
		"PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload",
		"PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
		"PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload",
		"GET /admin/v2/schemas/{tenant}/{namespace}/{topic}/schema",
		"POST /admin/v2/schemas/{tenant}/{namespace}/{topic}/schema",
		"DELETE /admin/v2/schemas/{tenant}/{namespace}/{topic}/schema",
		"GET /admin/v2/persistent/{tenant}/{namespace}",
		"DELETE /admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions",
	} {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	admin.Register(mux, admin.Config{Resources: e.res, Namespaces: e.topics, Logger: slog.New(slog.DiscardHandler)})
}

func TestRegisterNeedsItsDependencies(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Register without Resources did not panic")
		}
	}()
	admin.Register(http.NewServeMux(), admin.Config{})
}
