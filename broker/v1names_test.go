package broker

// Legacy (v1) names, property/cluster/namespace (issue 38): parsed as
// Pulsar parses them, served end to end under the v1 admin and lookup
// routes, and stored apart from the v2 namespace of the same words.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/wire/pb"
	"google.golang.org/protobuf/proto"
)

func TestParseTopicNameV1(t *testing.T) {
	for in, want := range map[string]TopicName{
		"persistent://sample/standalone/ns1/t": {"persistent", "sample", "standalone/ns1", "t"},
		"sample/standalone/ns1/t":              {"persistent", "sample", "standalone/ns1", "t"},
		"non-persistent://p/c/n/a/b":           {"non-persistent", "p", "c/n", "a/b"},
		"persistent://public/default/t":        {"persistent", "public", "default", "t"},
	} {
		got, err := ParseTopicName(in)
		if err != nil || got != want {
			t.Errorf("ParseTopicName(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if strings.Contains(in, "://") && got.String() != in {
			t.Errorf("%q prints as %q", in, got.String())
		}
	}
	for _, bad := range []string{"persistent://p/c/persistent/t", "persistent://p/c!/n/t", "persistent://p//n/t", "a/b"} {
		if _, err := ParseTopicName(bad); err == nil {
			t.Errorf("ParseTopicName(%q) accepted", bad)
		}
	}
	if got := (TopicName{"persistent", "p", "c/n", "t"}).ManagedLedgerName(); got != "p/c/n/persistent/t" {
		t.Errorf("v1 managed ledger name %q, want Pulsar's p/c/n/persistent/t", got)
	}
}

func TestV1RouteMapping(t *testing.T) {
	for in, want := range map[string]string{
		"/admin/namespaces/p":                       "/admin/v2/namespaces/p",
		"/admin/namespaces/p/c":                     "/admin/v2/namespaces/p?v1Cluster=c",
		"/admin/namespaces/p/c/n":                   "/admin/v2/namespaces/p/c%2Fn",
		"/admin/namespaces/p/c/n/permissions/role":  "/admin/v2/namespaces/p/c%2Fn/permissions/role",
		"/admin/persistent/p/c/n":                   "/admin/v2/persistent/p/c%2Fn",
		"/admin/non-persistent/p/c/n/t%20x/stats":   "/admin/v2/non-persistent/p/c%2Fn/t%20x/stats",
		"/admin/schemas/p/c/n/t/schema":             "/admin/v2/schemas/p/c%2Fn/t/schema",
		"/lookup/v2/destination/persistent/p/c/n/t": "/lookup/v2/topic/persistent/p/c%2Fn/t",
		"/admin/v2/namespaces/p/n":                  "",
		"/admin/persistent/p/c":                     "",
		"/lookup/v2/topic/persistent/p/n/t":         "",
		"/admin/namespaces/p/c//x":                  "",
	} {
		v2, q, ok := v1ToV2(in)
		got := ""
		switch {
		case ok && q != "":
			got = v2 + "?" + q
		case ok:
			got = v2
		}
		if got != want {
			t.Errorf("v1ToV2(%q) = %q, want %q", in, got, want)
		}
	}
}

// startV1Broker serves a broker with the admin API over a configuration
// store holding cluster "test"; it returns the web and the broker URLs.
func startV1Broker(t *testing.T) (web, brokerURL string) {
	t.Helper()
	b, brokerURL := startPolicyBrokerWith(t, func(*resources.Policies) {}, 0, Config{StatsUpdateFrequency: 100 * time.Millisecond})
	srv := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(srv.Close)
	return srv.URL, brokerURL
}

// TestV1NamesEndToEnd: a v1 namespace made and used through the v1 routes
// and the official client, beside the v2 namespace of the same words.
func TestV1NamesEndToEnd(t *testing.T) {
	web, brokerURL := startV1Broker(t)
	call := func(method, path, body string, want int) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, web+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, out, want)
		}
		if resp.StatusCode == http.StatusTemporaryRedirect {
			return []byte(resp.Header.Get("Location"))
		}
		return out
	}
	list := func(path string) []string {
		t.Helper()
		var out []string
		if err := json.Unmarshal(call("GET", path, "", 200), &out); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	call("PUT", "/admin/v2/tenants/sample", `{"allowedClusters":["test"]}`, 204)
	call("PUT", "/admin/namespaces/sample/test/ns1", "", 204)
	call("PUT", "/admin/v2/namespaces/sample/ns1", "", 204)
	call("PUT", "/admin/namespaces/sample/nowhere/ns1", "", 404) // no such cluster
	if got := list("/admin/namespaces/sample"); !slices.Equal(got, []string{"sample/ns1", "sample/test/ns1"}) {
		t.Fatalf("v1 list of the property: %v", got)
	}
	if got := list("/admin/namespaces/sample/test"); !slices.Equal(got, []string{"sample/test/ns1"}) {
		t.Fatalf("v1 list of the property in cluster test: %v", got)
	}
	if got := list("/admin/v2/namespaces/sample"); !slices.Equal(got, []string{"sample/ns1", "sample/test/ns1"}) {
		t.Fatalf("v2 list: %v", got)
	}
	if got := list("/admin/namespaces/sample/test/ns1/replication"); !slices.Equal(got, []string{"test"}) {
		t.Fatalf("a v1 namespace replicates to its cluster: %v", got)
	}

	// The official client on both, same words: each its own messages.
	const v1, v2 = "persistent://sample/test/ns1/orders", "persistent://sample/ns1/orders"
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: brokerURL, Logger: log.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	counts := map[string]int{v1: 3, v2: 2}
	for topic, n := range counts {
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatalf("subscribe %s: %v", topic, err)
		}
		sendN(t, newProducer(t, client, topic, pulsar.ProducerOptions{}), n)
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				t.Fatalf("receive on %s: %v", topic, err)
			}
			if m.Topic() != topic {
				t.Fatalf("message of %s came from %s", topic, m.Topic())
			}
			cons.Ack(m)
		}
		cons.Close()
	}
	if got := list("/admin/persistent/sample/test/ns1"); !slices.Equal(got, []string{v1}) {
		t.Fatalf("v1 topic list: %v", got)
	}
	if got := list("/admin/v2/persistent/sample/ns1"); !slices.Equal(got, []string{v2}) {
		t.Fatalf("v2 topic list: %v", got)
	}
	var st struct{ MsgInCounter int64 }
	eventually(t, "v1 stats", func() error {
		if err := json.Unmarshal(call("GET", "/admin/persistent/sample/test/ns1/orders/stats", "", 200), &st); err != nil {
			return err
		}
		if st.MsgInCounter != 3 {
			return fmt.Errorf("msgInCounter %d, want 3", st.MsgInCounter)
		}
		return nil
	})

	// Permissions, unload, lookup, on the v1 routes.
	call("POST", "/admin/persistent/sample/test/ns1/orders/permissions/alice", `["produce"]`, 204)
	if !strings.Contains(string(call("GET", "/admin/persistent/sample/test/ns1/orders/permissions", "", 200)), "alice") {
		t.Fatal("v1 topic grant not listed")
	}
	call("POST", "/admin/namespaces/sample/test/ns1/permissions/bob", `["consume"]`, 204)
	if !strings.Contains(string(call("GET", "/admin/namespaces/sample/test/ns1/permissions", "", 200)), "bob") {
		t.Fatal("v1 namespace grant not listed")
	}
	if strings.Contains(string(call("GET", "/admin/v2/namespaces/sample/ns1/permissions", "", 200)), "bob") {
		t.Fatal("a v1 grant showed on the v2 namespace of the same words")
	}
	call("PUT", "/admin/persistent/sample/test/ns1/orders/unload", "", 204)
	call("PUT", "/admin/namespaces/sample/test/ns1/unload", "", 204)
	if !strings.Contains(string(call("GET", "/lookup/v2/destination/persistent/sample/test/ns1/orders", "", 200)), "pulsar://") {
		t.Fatal("v1 lookup has no broker URL")
	}

	// A v1 namespace of another cluster is looked up there.
	call("PUT", "/admin/v2/clusters/east", `{"serviceUrl":"http://east.example:8080","brokerServiceUrl":"pulsar://east.example:6650"}`, 204)
	loc := string(call("GET", "/lookup/v2/destination/persistent/sample/east/ns2/t", "", 307))
	if !strings.HasPrefix(loc, "http://east.example:8080/lookup/v2/destination/persistent/sample/east/ns2/t?") {
		t.Fatalf("lookup of another cluster's v1 topic redirected to %q", loc)
	}
	raw := dialRaw(t, brokerURL)
	raw.connect()
	ans := raw.request(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
		Topic: proto.String("persistent://sample/east/ns2/t"), RequestId: proto.Uint64(7)}})
	lr := ans.GetLookupTopicResponse()
	if lr.GetResponse() != pb.CommandLookupTopicResponse_Redirect || lr.GetBrokerServiceUrl() != "pulsar://east.example:6650" ||
		!lr.GetAuthoritative() {
		t.Fatalf("raw LOOKUP of another cluster's v1 topic: %v", ans)
	}

	// Deleting the v1 namespace leaves the v2 one (the client's producers
	// go first: a connected one would create the topic again). The
	// producer the unload above sent reconnecting may have its PRODUCER
	// command in the broker when Close returns, and that command loads,
	// so creates, the topic again after the delete: delete until the
	// namespace is empty (as an operator would, on the same 409).
	client.Close()
	eventually(t, "delete the v1 namespace", func() error {
		if code, out, err := httpDo("DELETE", web+"/admin/persistent/sample/test/ns1/orders?force=true"); err != nil ||
			(code != http.StatusNoContent && code != http.StatusNotFound) {
			return fmt.Errorf("delete the topic: %d %s %v", code, out, err)
		}
		if code, out, err := httpDo("DELETE", web+"/admin/namespaces/sample/test/ns1"); err != nil || code != http.StatusNoContent {
			return fmt.Errorf("delete the namespace: %d %s %v", code, out, err)
		}
		return nil
	})
	if got := list("/admin/namespaces/sample"); !slices.Equal(got, []string{"sample/ns1"}) {
		t.Fatalf("after deleting the v1 namespace: %v", got)
	}
}

// httpDo sends a request without a body and returns the status and body.
func httpDo(method, url string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}
