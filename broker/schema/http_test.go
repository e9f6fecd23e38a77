package schema

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// newAdmin serves a registry over a memory store and returns a pulsaradmin
// client for it.
func newAdmin(t *testing.T, cfg Config) (pulsaradmin.Client, *httptest.Server) {
	t.Helper()
	r := newRegistry(t, newStore(t), cfg)
	mux := http.NewServeMux()
	r.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	admin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return admin, srv
}

// statusOf is the HTTP status of a pulsaradmin error, 0 if none.
func statusOf(err error) int {
	var re rest.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func TestAdminSchemaLifecycle(t *testing.T) {
	admin, _ := newAdmin(t, Config{})
	s := admin.Schemas()
	const topic = "persistent://public/default/users"

	if _, err := s.GetSchemaInfo(topic); statusOf(err) != http.StatusNotFound {
		t.Fatalf("no schema: %v, want 404", err)
	}
	props := map[string]string{"owner": "team-a"}
	if err := s.CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: userV1, Properties: props}); err != nil {
		t.Fatalf("create: %v", err)
	}
	info, err := s.GetSchemaInfoWithVersion(topic)
	if err != nil || info.Version != 0 || info.SchemaInfo.Type != "AVRO" || string(info.SchemaInfo.Schema) != userV1 ||
		info.SchemaInfo.Properties["owner"] != "team-a" || info.SchemaInfo.Timestamp == 0 || info.SchemaInfo.Name != "users" {
		t.Fatalf("GetSchemaInfoWithVersion = %+v, %+v, %v", info, info.SchemaInfo, err)
	}

	compat, err := s.TestCompatibilityWithPostSchemaPayload(topic, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: userAgeNoDef})
	if err != nil || compat.IsCompatibility || compat.SchemaCompatibilityStrategy != utils.SchemaCompatibilityStrategyFull {
		t.Fatalf("compatibility of an incompatible schema = %+v, %v", compat, err)
	}
	compat, err = s.TestCompatibilityWithSchemaInfo(topic, utils.SchemaInfo{Type: "AVRO", Schema: []byte(userAgeDefault)})
	if err != nil || !compat.IsCompatibility {
		t.Fatalf("compatibility of a compatible schema = %+v, %v", compat, err)
	}

	err = s.CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: userAgeNoDef})
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "no default") {
		t.Fatalf("incompatible upload: %v, want 409 with the reason", err)
	}
	err = s.CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: `{"type":"record"}`})
	if statusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("invalid upload: %v, want 422", err)
	}
	err = s.CreateSchemaBySchemaInfo(topic+"-partition-1", utils.SchemaInfo{Type: "AVRO", Schema: []byte(userAgeDefault)})
	if err != nil {
		t.Fatalf("upload through a partition: %v", err)
	}

	one, err := s.GetSchemaInfoByVersion(topic, 1)
	if err != nil || string(one.Schema) != userAgeDefault {
		t.Fatalf("GetSchemaInfoByVersion(1) = %+v, %v", one, err)
	}
	if _, err := s.GetSchemaInfoByVersion(topic, 9); statusOf(err) != http.StatusNotFound {
		t.Fatalf("missing version: %v, want 404", err)
	}
	all, err := s.GetAllSchemas(topic)
	if err != nil || len(all) != 2 || all[0].Version != 0 || all[1].Version != 1 {
		t.Fatalf("GetAllSchemas = %v, %v", all, err)
	}
	if v, err := s.GetVersionByPayload(topic, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: userV1Spaced}); v != 0 || err != nil {
		t.Fatalf("GetVersionByPayload = %d, %v", v, err)
	}

	if err := s.DeleteSchema(topic); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.GetSchemaInfo(topic); statusOf(err) != http.StatusNotFound {
		t.Fatalf("after delete: %v, want 404", err)
	}
	if all, err := s.GetAllSchemas(topic); err != nil || len(all) != 0 {
		t.Fatalf("GetAllSchemas after delete = %v, %v", all, err)
	}
	if err := s.CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "STRING"}); err != nil {
		t.Fatalf("a new type after delete: %v", err)
	}
	if info, err := s.GetSchemaInfoWithVersion(topic); err != nil || info.Version != 3 || info.SchemaInfo.Type != "STRING" {
		t.Fatalf("after re-create = %+v, %v", info, err)
	}
	if err := s.ForceDeleteSchema(topic); err != nil {
		t.Fatalf("force delete: %v", err)
	}
	if err := s.CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "AVRO", Schema: userV1}); err != nil {
		t.Fatalf("create after force delete: %v", err)
	}
	if info, err := s.GetSchemaInfoWithVersion(topic); err != nil || info.Version != 0 {
		t.Fatalf("after force delete the history restarts: %+v, %v", info, err)
	}
}

func TestAdminErrors(t *testing.T) {
	admin, srv := newAdmin(t, Config{})
	s := admin.Schemas()
	err := s.CreateSchemaByPayload("persistent://public/default/b", utils.PostSchemaPayload{SchemaType: "BYTES"})
	if statusOf(err) != http.StatusNotAcceptable {
		t.Fatalf("BYTES upload: %v, want 406", err)
	}
	err = s.CreateSchemaByPayload("persistent://public/default/b", utils.PostSchemaPayload{SchemaType: "SHINY"})
	if statusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("unknown type: %v, want 422", err)
	}
	for path, want := range map[string]int{
		"/admin/v2/schemas/public/default/b/schema/abc":         http.StatusBadRequest,
		"/admin/v2/schemas/public/default/b%0A/schema":          http.StatusPreconditionFailed,
		"/admin/v2/schemas/public/default/b-partition-0/schema": http.StatusNotFound,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d %v, want %d", path, resp.StatusCode, body, want)
		}
	}
	resp, err := http.Post(srv.URL+"/admin/v2/schemas/public/default/b/schema", "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusBadRequest || body["reason"] == "" {
		t.Fatalf("bad body = %d %v %v, want 400 with a reason", resp.StatusCode, body, err)
	}
	resp.Body.Close()
}

// TestAdminKeyValue: KEY_VALUE uploads in the REST API's {"key", "value"}
// form are packed as Pulsar stores them and shown back in that form.
func TestAdminKeyValue(t *testing.T) {
	admin, srv := newAdmin(t, Config{})
	const topic = "persistent://public/default/kv"
	form := `{"key":"","value":` + userV1 + `}`
	props := map[string]string{kvKeyType: "STRING", kvValueType: "AVRO"}
	if err := admin.Schemas().CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "KEY_VALUE", Schema: form, Properties: props}); err != nil {
		t.Fatalf("create KEY_VALUE: %v", err)
	}
	resp, err := http.Get(srv.URL + "/admin/v2/schemas/public/default/kv/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got getSchemaResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Type != "KEY_VALUE" {
		t.Fatalf("GET = %+v, %v", got, err)
	}
	var kv struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(got.Data), &kv); err != nil || kv.Key != "" || !sameSchema(avroInfo(string(kv.Value)), avroInfo(userV1)) {
		t.Fatalf("data %s: %v", got.Data, err)
	}
	bad := `{"key":"","value":` + userAgeNoDef + `}`
	err = admin.Schemas().CreateSchemaByPayload(topic, utils.PostSchemaPayload{SchemaType: "KEY_VALUE", Schema: bad, Properties: props})
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "value schema") {
		t.Fatalf("incompatible value schema: %v, want 409", err)
	}
}

// TestRegisterBesideBrokerRoutes: the schema routes coexist with the
// broker's /admin/v2/{domain}/... patterns on one mux.
func TestRegisterBesideBrokerRoutes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/schema", func(http.ResponseWriter, *http.Request) {})
	r := newRegistry(t, newStore(t), Config{})
	r.Register(mux) // panics on a conflicting pattern
	req := httptest.NewRequest(http.MethodGet, "/admin/v2/schemas/t/ns/x/schema", nil)
	if _, pattern := mux.Handler(req); !strings.HasPrefix(pattern, "GET /admin/v2/schemas/") {
		t.Fatalf("schema request routed to %q", pattern)
	}
}
