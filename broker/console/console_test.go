package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// fakeSource answers every console call with fixed values.
type fakeSource struct{ sessionErr error }

func (f fakeSource) ConsoleSession(*http.Request) (Session, error) {
	if f.sessionErr != nil {
		return Session{AuthEnabled: true, AuthMethods: []string{"token"}}, f.sessionErr
	}
	return Session{Role: "r", AuthMethods: []string{}}, nil
}
func (fakeSource) ConsoleOverview(context.Context) (Overview, error) {
	return Overview{Cluster: "c"}, nil
}
func (fakeSource) ConsoleSummary(context.Context) (BrokerSummary, error) { return BrokerSummary{}, nil }
func (fakeSource) ConsoleBookies(context.Context) ([]Bookie, error)      { return []Bookie{}, nil }
func (fakeSource) ConsoleTopics(_ context.Context, tenant, ns string) ([]TopicRow, error) {
	return []TopicRow{{Name: "persistent://" + tenant + "/" + ns + "/a"}}, nil
}
func (fakeSource) ConsoleLocalTopics(context.Context, string, string) ([]TopicRow, error) {
	return []TopicRow{}, nil
}
func (fakeSource) ConsoleHistory(_ context.Context, topic string) (History, error) {
	if strings.HasSuffix(topic, "/missing") {
		return History{}, &statusError{status: http.StatusNotFound, reason: "no such topic"}
	}
	return History{IntervalSeconds: 5, Samples: []Sample{{T: 5000}}}, nil
}
func (fakeSource) ConsoleLocalHistory(string) (History, bool) { return History{}, false }

// recordingAdmin stands for the broker's handler: it records what it was
// asked and answers with fn.
type recordingAdmin struct {
	paths []string
	fn    func(w http.ResponseWriter, r *http.Request)
}

func (a *recordingAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.paths = append(a.paths, r.Method+" "+r.URL.EscapedPath())
	a.fn(w, r)
}

func serve(h http.Handler, method, target string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func reasonOf(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct{ Reason string }
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("answer %q is not Pulsar's error shape: %v", rec.Body.String(), err)
	}
	return e.Reason
}

func TestStaticServesTheAppForEveryPage(t *testing.T) {
	h := Handler(Config{Source: fakeSource{}, Admin: http.NotFoundHandler()})
	index, err := dist.ReadFile("dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console/", "/console/index.html", "/console/topics/deep/link"} {
		rec := serve(h, http.MethodGet, p, nil)
		if rec.Code != http.StatusOK || rec.Body.String() != string(index) {
			t.Errorf("GET %s: %d, body %.60q; want index.html", p, rec.Code, rec.Body.String())
		}
		if rec.Header().Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: index.html must not be cached (a new binary's assets would be missed)", p)
		}
	}
	if rec := serve(h, http.MethodGet, "/console/assets/missing.js", nil); rec.Code != http.StatusNotFound {
		t.Errorf("a missing asset answered %d, want 404 (not the app's page)", rec.Code)
	}
	if rec := serve(h, http.MethodPost, "/console/", nil); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/ answered %d, want 405", rec.Code)
	}
	if rec := serve(h, http.MethodGet, "/console", nil); rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/console/" {
		t.Errorf("GET /console answered %d to %q, want 301 to /console/", rec.Code, rec.Header().Get("Location"))
	}
}

func TestEveryBuiltAssetIsServed(t *testing.T) {
	h := Handler(Config{Source: fakeSource{}, Admin: http.NotFoundHandler()})
	entries, err := dist.ReadDir("dist/assets")
	if err != nil {
		t.Skip("no built assets (dist holds only a placeholder page)")
	}
	for _, e := range entries {
		rec := serve(h, http.MethodGet, "/console/assets/"+e.Name(), nil)
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("asset %s: %d, %d bytes", e.Name(), rec.Code, rec.Body.Len())
		}
		if !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("asset %s is not cached as immutable (its name carries its hash)", e.Name())
		}
	}
}

func TestEndpointsAnswerJSONAndErrorsWithTheirStatus(t *testing.T) {
	h := Handler(Config{Source: fakeSource{}, Admin: http.NotFoundHandler()})
	rec := serve(h, http.MethodGet, "/console/api/namespaces/t/ns/topics", nil)
	var rows []TopicRow
	if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].Name != "persistent://t/ns/a" {
		t.Fatalf("topics: %d %s (%v)", rec.Code, rec.Body.String(), err)
	}
	rec = serve(h, http.MethodGet, "/console/api/history/persistent/t/ns/missing", nil)
	if rec.Code != http.StatusNotFound || reasonOf(t, rec) != "no such topic" {
		t.Errorf("history of a missing topic: %d %s", rec.Code, rec.Body.String())
	}
	rec = serve(h, http.MethodGet, "/console/api/local/history/persistent/t/ns/a", nil)
	if rec.Code != http.StatusNotFound {
		t.Errorf("local history of a topic not loaded: %d, want 404", rec.Code)
	}
	rec = serve(h, http.MethodGet, "/console/api/nothing", nil)
	if rec.Code != http.StatusNotFound || !strings.Contains(reasonOf(t, rec), "/console/api/nothing") {
		t.Errorf("unknown endpoint: %d %s", rec.Code, rec.Body.String())
	}
	unauth := Handler(Config{Source: fakeSource{sessionErr: errors.New("bad token")}, Admin: http.NotFoundHandler(),
		StatusOf: func(error) int { return http.StatusUnauthorized }})
	rec = serve(unauth, http.MethodGet, "/console/api/session", nil)
	if rec.Code != http.StatusUnauthorized || reasonOf(t, rec) != "bad token" || !strings.Contains(rec.Body.String(), `"authMethods":["token"]`) {
		t.Errorf("session with bad credentials: %d %s, want 401 with the reason and the methods to offer", rec.Code, rec.Body.String())
	}
	ro := Handler(Config{Source: fakeSource{}, Admin: http.NotFoundHandler(), ReadOnly: true})
	var s Session
	if err := json.Unmarshal(serve(ro, http.MethodGet, "/console/api/session", nil).Body.Bytes(), &s); err != nil || !s.ReadOnly {
		t.Errorf("the session of a read-only console does not say so: %+v %v", s, err)
	}
}

func TestAdminPassthroughIsTheAdminAPI(t *testing.T) {
	adm := &recordingAdmin{fn: func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Pulsar-Message-ID", "1:2")
		_, _ = w.Write([]byte(r.Header.Get("Authorization") + "|" + string(body)))
	}}
	h := Handler(Config{Source: fakeSource{}, Admin: adm})
	rec := serve(h, http.MethodPost, "/console/api/admin/v2/persistent/t/ns/a%2Fb/subscription/s/resetcursor",
		strings.NewReader(`{"ledgerId":1}`), "Authorization", "Bearer tok")
	if rec.Code != http.StatusOK || rec.Body.String() != `Bearer tok|{"ledgerId":1}` || rec.Header().Get("X-Pulsar-Message-ID") != "1:2" {
		t.Errorf("passthrough answered %d %q (headers %v)", rec.Code, rec.Body.String(), rec.Header())
	}
	want := "POST /admin/v2/persistent/t/ns/a%2Fb/subscription/s/resetcursor"
	if len(adm.paths) != 1 || adm.paths[0] != want {
		t.Errorf("admin handler was asked %v, want [%s] (the escaped name kept)", adm.paths, want)
	}
}

func TestReadOnlyConsoleChangesNothing(t *testing.T) {
	adm := &recordingAdmin{fn: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }}
	h := Handler(Config{Source: fakeSource{}, Admin: adm, ReadOnly: true})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		rec := serve(h, m, "/console/api/admin/v2/persistent/t/ns/a/subscription/s/skip_all", nil)
		if rec.Code != http.StatusForbidden || reasonOf(t, rec) != ReadOnlyReason {
			t.Errorf("%s in read-only mode: %d %s", m, rec.Code, rec.Body.String())
		}
	}
	if len(adm.paths) != 0 {
		t.Fatalf("read-only console passed changes to the admin API: %v", adm.paths)
	}
	if rec := serve(h, http.MethodGet, "/console/api/admin/v2/tenants", nil); rec.Code != http.StatusNoContent || len(adm.paths) != 1 {
		t.Errorf("GET in read-only mode: %d, admin asked %v", rec.Code, adm.paths)
	}
}

// A topic owned by another broker: the admin API redirects, and the
// console follows with the caller's credentials, so the browser never
// sees another origin.
func TestAdminRedirectIsFollowedWithTheCallersCredentials(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"owner":true,"path":"` + r.URL.Path + `","body":"` + string(body) + `"}`))
	}))
	defer owner.Close()
	adm := &recordingAdmin{fn: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Location", owner.URL+r.URL.Path+"?authoritative=true")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}}
	h := Handler(Config{Source: fakeSource{}, Admin: adm, Redirects: owner.Client()})
	rec := serve(h, http.MethodPost, "/console/api/admin/v2/persistent/t/ns/a/subscription/s/skip/3", strings.NewReader("x"),
		"Authorization", "Bearer tok")
	want := `{"owner":true,"path":"/admin/v2/persistent/t/ns/a/subscription/s/skip/3","body":"x"}`
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Fatalf("followed redirect answered %d %q, want 200 %s", rec.Code, rec.Body.String(), want)
	}
	if ct := rec.Header().Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" {
		t.Errorf("Content-Type %v: the owner's alone expected", ct)
	}
	if rec.Header().Get("Location") != "" {
		t.Errorf("the redirect's Location leaked to the browser")
	}
}

func TestAdminRedirectLoopsEnd(t *testing.T) {
	var loop *httptest.Server
	loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer loop.Close()
	adm := &recordingAdmin{fn: func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}}
	h := Handler(Config{Source: fakeSource{}, Admin: adm, Redirects: loop.Client()})
	rec := serve(h, http.MethodGet, "/console/api/admin/v2/persistent/t/ns/a/stats", nil)
	if rec.Code != http.StatusBadGateway || !strings.Contains(reasonOf(t, rec), "redirected more than") {
		t.Errorf("redirect loop: %d %s, want 502 naming it", rec.Code, rec.Body.String())
	}
	adm.fn = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "file:///etc/passwd")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}
	rec = serve(h, http.MethodGet, "/console/api/admin/v2/persistent/t/ns/a/stats", nil)
	if rec.Code != http.StatusBadGateway || !strings.Contains(reasonOf(t, rec), "not a broker URL") {
		t.Errorf("redirect to a non-HTTP URL: %d %s", rec.Code, rec.Body.String())
	}
}

// The ring against a model (every recorded sample, the last per
// interval kept, the last HistorySamples of those), over seeded random
// gaps between calls.
func TestRingKeepsTheLastSamplesPerInterval(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var r Ring
		var model []Sample
		now := time.UnixMilli(1_700_000_000_000)
		var c Counters
		for i := range 200 {
			gap := time.Duration(1+rng.IntN(8000)) * time.Millisecond
			prev := c
			c.MsgsIn += int64(rng.IntN(1000))
			c.BytesIn += int64(rng.IntN(100000))
			c.Backlog = int64(rng.IntN(50))
			at := now.Add(gap)
			r.Record(c, at)
			if i > 0 {
				secs := gap.Seconds()
				s := Sample{T: at.Truncate(HistoryInterval).UnixMilli(), Backlog: c.Backlog,
					Rates: Rates{MsgRateIn: float64(c.MsgsIn-prev.MsgsIn) / secs, MsgThroughputIn: float64(c.BytesIn-prev.BytesIn) / secs}}
				if n := len(model); n > 0 && model[n-1].T == s.T {
					model[n-1] = s
				} else {
					model = append(model, s)
				}
			}
			now = at
		}
		if len(model) > HistorySamples {
			model = model[len(model)-HistorySamples:]
		}
		got := r.Snapshot().Samples
		if len(got) != len(model) {
			t.Fatalf("seed %d: %d samples, model %d", seed, len(got), len(model))
		}
		for i := range got {
			if got[i] != model[i] {
				t.Fatalf("seed %d: sample %d = %+v, model %+v", seed, i, got[i], model[i])
			}
		}
	}
}

func TestSumHistoriesAddsAtEqualTimes(t *testing.T) {
	a := History{Samples: []Sample{{T: 5000, Backlog: 1, Rates: Rates{MsgRateIn: 1}}, {T: 10000, Backlog: 2}}}
	b := History{Samples: []Sample{{T: 10000, Backlog: 3, Rates: Rates{MsgRateIn: 4}}, {T: 15000, Backlog: 5}}}
	got := SumHistories([]History{a, b}).Samples
	want := []Sample{{T: 5000, Backlog: 1, Rates: Rates{MsgRateIn: 1}}, {T: 10000, Backlog: 5, Rates: Rates{MsgRateIn: 4}}, {T: 15000, Backlog: 5}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPartitionRowsSum(t *testing.T) {
	row := TopicRow{Name: "p"}
	row.Add(TopicRow{Backlog: 2, StorageSize: 10, Producers: 1, Subscriptions: 2, Consumers: 1, Loaded: true,
		Replication: map[string]Replication{"c2": {Connected: true, ReplicationBacklog: 3, ReplicationDelayInSeconds: 4}}})
	row.Add(TopicRow{Backlog: 5, StorageSize: 1, Subscriptions: 2,
		Replication: map[string]Replication{"c2": {Connected: false, ReplicationBacklog: 1, ReplicationDelayInSeconds: 9}}})
	want := Replication{Connected: false, ReplicationBacklog: 4, ReplicationDelayInSeconds: 9}
	if row.Backlog != 7 || row.StorageSize != 11 || row.Subscriptions != 2 || row.Producers != 1 || !row.Loaded || row.Replication["c2"] != want {
		t.Errorf("partitioned row %+v", row)
	}
}

// What the history costs per topic, as the package doc and
// docs/console.md say.
func TestRingSize(t *testing.T) {
	if s := unsafe.Sizeof(Sample{}); s != 56 {
		t.Errorf("a sample is %d bytes; the docs say 56", s)
	}
	if r := unsafe.Sizeof(Ring{}); r > 3600 {
		t.Errorf("a ring is %d bytes; the docs say about 3.5 KiB", r)
	}
}
