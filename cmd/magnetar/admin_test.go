package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/broker/schema"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// adminCLI runs magnetar admin in-process against url.
type adminCLI struct {
	t   *testing.T
	url string
}

// run runs the command and returns its exit status and output.
func (a adminCLI) run(args ...string) (code int, stdout, stderr string) {
	a.t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"admin", "--admin-url", a.url}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed and returns its stdout.
func (a adminCLI) ok(args ...string) string {
	a.t.Helper()
	code, out, errOut := a.run(args...)
	if code != 0 {
		a.t.Fatalf("magnetar admin %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// json runs a command with --output json and decodes its answer into v.
func (a adminCLI) json(v any, args ...string) {
	a.t.Helper()
	out := a.ok(append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		a.t.Fatalf("magnetar admin %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must exit with code and returns its stderr.
func (a adminCLI) fails(code int, args ...string) string {
	a.t.Helper()
	got, out, errOut := a.run(args...)
	if got != code {
		a.t.Fatalf("magnetar admin %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
	}
	return errOut
}

func wantContains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("%s: want %q in\n%s", what, w, got)
		}
	}
}

func TestAdminUnits(t *testing.T) {
	times := map[string]int64{"0": 0, "30": 30, "30s": 30, "10m": 600, "3h": 10800, "2d": 172800, "1w": 604800, "1y": 365 * 86400, "5H": 18000}
	for in, want := range times {
		if got, err := parseRelativeTime("time", in); err != nil || got != want {
			t.Errorf("parseRelativeTime(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "h", "3x", "-5m", "1.5h", "3mo", "99999999999999999y"} {
		if _, err := parseRelativeTime("time", in); err == nil || !strings.Contains(err.Error(), "--time") {
			t.Errorf("parseRelativeTime(%q): want an error naming --time, got %v", in, err)
		}
	}
	sizes := map[string]int64{"0": 0, "4096": 4096, "10k": 10 << 10, "10M": 10 << 20, "16G": 16 << 30, "3t": 3 << 40}
	for in, want := range sizes {
		if got, err := parseSize("size", in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "10Q", "-1", "G", "1.5G"} {
		if _, err := parseSize("size", in); err == nil || !strings.Contains(err.Error(), "--size") {
			t.Errorf("parseSize(%q): want an error naming --size, got %v", in, err)
		}
	}
	retention := []struct {
		time, size string
		minutes    int
		mib        int64
	}{{"3h", "10G", 180, 10240}, {"-1", "-1", -1, -1}, {"0", "0", 0, 0}, {"90", "1500k", 1, 1}}
	for _, c := range retention {
		p, err := parseRetention(c.time, c.size)
		if err != nil || p.RetentionTimeInMinutes != c.minutes || p.RetentionSizeInMB != c.mib {
			t.Errorf("parseRetention(%q, %q) = %+v, %v", c.time, c.size, p, err)
		}
	}
	if _, err := parseRetention("3h", ""); err == nil {
		t.Errorf("parseRetention without --size: no error")
	}
	now := time.UnixMilli(1_000_000_000)
	if got := timeAgo(now, 600); got != 1_000_000_000-600_000 {
		t.Errorf("timeAgo: %d", got)
	}
	if got := timeAgo(now, 1<<62); got != 0 {
		t.Errorf("timeAgo before the epoch: %d", got)
	}
}

func TestAdminWriteFlat(t *testing.T) {
	var b bytes.Buffer
	v := map[string]any{"b": map[string]any{"y": 2, "x": "s"}, "a": []string{"p", "q"}, "n": nil, "e": []int{},
		"l": []map[string]int{{"k": 1}}}
	if err := writeFlat(&b, v); err != nil {
		t.Fatal(err)
	}
	want := "a: p, q\nb.x: s\nb.y: 2\ne: (none)\nl[0].k: 1\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := writeFlat(&b, (*int)(nil)); err != nil || b.String() != "(not set)\n" {
		t.Fatalf("nil: %q %v", b.String(), err)
	}
}

func TestAdminSplitBatch(t *testing.T) {
	var body []byte
	for i, p := range []string{"one", "two"} {
		meta, err := proto.Marshal(&pb.SingleMessageMetadata{PayloadSize: proto.Int32(int32(len(p))),
			Properties: []*pb.KeyValue{{Key: proto.String("i"), Value: proto.String(fmt.Sprint(i))}}})
		if err != nil {
			t.Fatal(err)
		}
		body = binary.BigEndian.AppendUint32(body, uint32(len(meta)))
		body = append(append(body, meta...), p...)
	}
	tn, _ := utils.GetTopicName("t")
	h := http.Header{}
	h.Set("X-Pulsar-Message-ID", "7:3")
	h.Set("X-Pulsar-Num-Batch-Message", "2")
	h.Set("X-Pulsar-Property", `{"Key":"v"}`)
	msgs, err := messagesFromResponse(tn, h, body)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%v %v", msgs, err)
	}
	m := msgs[1]
	if string(m.Payload) != "two" || m.MessageID.LedgerID != 7 || m.MessageID.EntryID != 3 || m.MessageID.BatchIndex != 1 ||
		m.Properties["i"] != "1" || m.Properties["Key"] != "v" {
		t.Fatalf("second message: %+v", m)
	}
	if _, err := messagesFromResponse(tn, h, body[:len(body)-1]); err == nil {
		t.Fatalf("truncated batch: no error")
	}
	h.Set("X-Pulsar-Num-Batch-Message", "3")
	if _, err := messagesFromResponse(tn, h, body); err == nil {
		t.Fatalf("short batch: no error")
	}
}

// TestAdminUsage: usage mistakes exit 2 with the usage, before any call.
func TestAdminUsage(t *testing.T) {
	a := adminCLI{t, "http://127.0.0.1:1"}
	if code, out, _ := a.run(); code != 0 || !strings.Contains(out, "groups:") {
		t.Fatalf("admin: %d %q", code, out)
	}
	wantContains(t, "unknown group", a.fails(2, "frob"), `unknown command group "frob"`)
	wantContains(t, "group alone", a.fails(2, "tenants"), "usage: magnetar admin tenants <command>", "create TENANT")
	wantContains(t, "unknown command", a.fails(2, "tenants", "frob"), `unknown command "frob"`)
	wantContains(t, "missing argument", a.fails(2, "tenants", "get"), "want 1 arguments (TENANT), got 0",
		"usage: magnetar admin tenants get TENANT")
	wantContains(t, "extra argument", a.fails(2, "tenants", "list", "x"), "unexpected arguments")
	wantContains(t, "bad output", a.fails(2, "--output", "yaml", "tenants", "list"), `--output: want text or json, got "yaml"`)
	wantContains(t, "unknown flag", a.fails(2, "tenants", "create", "x", "--frob"), "flag provided but not defined: -frob")
	wantContains(t, "bad time", a.fails(2, "namespaces", "set-retention", "public/default", "--time", "3x", "--size", "1G"),
		`--time: bad time "3x"`, "usage: magnetar admin namespaces set-retention TENANT/NAMESPACE")
	wantContains(t, "bad size", a.fails(2, "namespaces", "set-retention", "public/default", "--time", "3h", "--size", "10Q"),
		`--size: bad size "10Q"`)
	wantContains(t, "bad ttl", a.fails(2, "namespaces", "set-message-ttl", "public/default", "--ttl", "soon"), `--ttl: bad time "soon"`)
	wantContains(t, "bad namespace", a.fails(2, "namespaces", "policies", "public"), `bad namespace "public"`)
	wantContains(t, "bad topic", a.fails(2, "topics", "stats", "a/b"), `bad topic "a/b"`)
	wantContains(t, "reset both", a.fails(2, "topics", "reset-cursor", "t", "--subscription", "s", "--time", "1h", "--messageId", "1:2"),
		"exactly one of --time and --messageId")
	wantContains(t, "reset bad id", a.fails(2, "topics", "reset-cursor", "t", "--subscription", "s", "--messageId", "x"),
		`--messageId "x"`)
	wantContains(t, "no subscription", a.fails(2, "topics", "skip", "t", "--count", "1"), "--subscription is required")
	wantContains(t, "policy", a.fails(2, "namespaces", "set-backlog-quota", "public/default", "--limit-size", "1G", "--policy", "drop"),
		`--policy "drop"`)
	wantContains(t, "dedup", a.fails(2, "namespaces", "set-deduplication", "public/default"), "exactly one of --enable and --disable")
	wantContains(t, "strategy", a.fails(2, "namespaces", "set-schema-compatibility-strategy", "public/default", "--compatibility", "sideways"),
		`--compatibility "sideways"`)
	wantContains(t, "partitions", a.fails(2, "topics", "create-partitioned-topic", "t"), "--partitions is required")
	wantContains(t, "schema file", a.fails(2, "schemas", "upload", "t"), "--filename is required")
	if code, out, _ := a.run("tenants", "get", "x", "-h"); code != 0 || !strings.Contains(out, "usage: magnetar admin tenants get TENANT") {
		t.Fatalf("-h: %d %q", code, out)
	}
	wantContains(t, "bad url", a.fails(2, "--admin-url", "localhost:8080", "tenants", "list"), `--admin-url "localhost:8080"`)
	wantContains(t, "unreachable", a.fails(1, "tenants", "list"), "magnetar admin tenants list: ", "connection refused")
}

// TestAdminAgainstStandalone runs every group's commands against a
// standalone server, in text and JSON.
func TestAdminAgainstStandalone(t *testing.T) {
	f := standaloneFlags{dataDir: t.TempDir(), listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	stop := runStandaloneFor(t, f)
	defer stop()
	web := fmt.Sprintf("http://127.0.0.1:%d", f.webPort)
	t.Run("clusters", func(t *testing.T) { adminClusters(adminCLI{t, web}) })
	t.Run("tenants", func(t *testing.T) { adminTenants(adminCLI{t, web}) })
	t.Run("namespaces", func(t *testing.T) { adminNamespaces(adminCLI{t, web}) })
	t.Run("topics", func(t *testing.T) { adminTopics(adminCLI{t, web}, fmt.Sprintf("pulsar://127.0.0.1:%d", f.brokerPort)) })
	t.Run("brokers", func(t *testing.T) { adminBrokers(adminCLI{t, web}, fmt.Sprintf("127.0.0.1:%d", f.webPort)) })
	t.Run("bundles", func(t *testing.T) { adminBundles(adminCLI{t, web}, fmt.Sprintf("127.0.0.1:%d", f.webPort)) })
	t.Run("bookies", func(t *testing.T) { adminBookiesStandalone(adminCLI{t, web}) })
	t.Run("schemas", func(t *testing.T) {
		url := web
		if !servesSchemas(t, web) {
			t.Log("the standalone broker does not serve the schema endpoints: testing against broker/schema's handler")
			url = schemaServer(t)
		}
		adminSchemas(adminCLI{t, url})
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("MAGNETAR_ADMIN_URL", web)
		var out, errOut bytes.Buffer
		if code := run([]string{"admin", "clusters", "list"}, &out, &errOut); code != 0 || out.String() != "standalone\n" {
			t.Fatalf("with MAGNETAR_ADMIN_URL: %d %q %q", code, out.String(), errOut.String())
		}
	})
}

func adminClusters(a adminCLI) {
	t := a.t
	if out := a.ok("clusters", "list"); out != "standalone\n" {
		t.Fatalf("clusters list: %q", out)
	}
	if out := a.ok("clusters", "list", "--output", "json"); out != "[\n  \"standalone\"\n]\n" {
		t.Fatalf("clusters list json: %q", out)
	}
	wantContains(t, "clusters get", a.ok("clusters", "get", "standalone"), "serviceUrl: "+a.url+"\n", "brokerServiceUrl: pulsar://")
	a.ok("clusters", "create", "east", "--url", "http://east:8080", "--broker-url", "pulsar://east:6650")
	a.ok("clusters", "update", "east", "--url", "http://east2:8080")
	var cd utils.ClusterData
	a.json(&cd, "clusters", "get", "east")
	if cd.ServiceURL != "http://east2:8080" || cd.BrokerServiceURL != "pulsar://east:6650" {
		t.Fatalf("after update: %+v", cd)
	}
	wantContains(t, "create twice", a.fails(1, "clusters", "create", "east"), "HTTP 409")
	a.ok("clusters", "delete", "east")
	wantContains(t, "get deleted", a.fails(1, "clusters", "get", "east"), "magnetar admin clusters get: ", "HTTP 404")
}

func adminTenants(a adminCLI) {
	t := a.t
	a.ok("tenants", "create", "acme", "--admin-roles", "alice")
	var td utils.TenantData
	a.json(&td, "tenants", "get", "acme")
	if fmt.Sprint(td.AdminRoles, td.AllowedClusters) != "[alice] [standalone]" {
		t.Fatalf("tenant: %+v", td)
	}
	a.ok("tenants", "update", "acme", "--admin-roles", "bob,carol")
	wantContains(t, "tenants get", a.ok("tenants", "get", "acme"), "adminRoles: bob, carol\n", "allowedClusters: standalone\n")
	// pulsar-admin's short form counts as given (the Go client's suite
	// setup runs tenants update public -r anonymous).
	a.ok("tenants", "update", "acme", "-r", "dave")
	wantContains(t, "tenants update -r", a.ok("tenants", "get", "acme"), "adminRoles: dave\n")
	a.ok("tenants", "update", "acme", "--admin-roles", "bob,carol")
	wantContains(t, "tenants list", a.ok("tenants", "list"), "acme\n", "public\n")
	stderr := a.fails(1, "tenants", "get", "nosuch")
	wantContains(t, "unknown tenant", stderr, "magnetar admin tenants get: ", "HTTP 404")
	if strings.Contains(stderr, "usage:") {
		t.Fatalf("a refusal printed the usage: %s", stderr)
	}
	wantContains(t, "namespace of unknown tenant", a.fails(1, "namespaces", "create", "nosuch/ns"), "HTTP 404")
	a.ok("tenants", "create", "gone", "--allowed-clusters", "standalone")
	a.ok("tenants", "delete", "gone")
	a.fails(1, "tenants", "get", "gone")
}

func adminNamespaces(a adminCLI) {
	t := a.t
	a.ok("namespaces", "create", "acme/ns", "--bundles", "4")
	if out := a.ok("namespaces", "list", "acme"); out != "acme/ns\n" {
		t.Fatalf("namespaces list: %q", out)
	}
	bundles := strings.Fields(a.ok("namespaces", "bundles", "acme/ns"))
	if len(bundles) != 4 || bundles[0] != "0x00000000_0x40000000" {
		t.Fatalf("bundles: %q", bundles)
	}
	wantContains(t, "policies", a.ok("namespaces", "policies", "acme/ns"), "bundles.numBundles: 4\n", "replication_clusters: standalone\n")

	a.ok("namespaces", "set-retention", "acme/ns", "-t", "3h", "-s", "10G")
	var rp utils.RetentionPolicies
	a.json(&rp, "namespaces", "get-retention", "acme/ns")
	if rp.RetentionTimeInMinutes != 180 || rp.RetentionSizeInMB != 10240 {
		t.Fatalf("retention: %+v", rp)
	}
	wantContains(t, "get-retention", a.ok("namespaces", "get-retention", "acme/ns"), "retentionTimeInMinutes: 180\n")
	a.ok("namespaces", "remove-retention", "acme/ns")
	if out := a.ok("namespaces", "get-retention", "acme/ns", "--output", "json"); out != "null\n" {
		t.Fatalf("removed retention, json: %q", out)
	}
	if out := a.ok("namespaces", "get-retention", "acme/ns"); out != "(not set)\n" {
		t.Fatalf("removed retention: %q", out)
	}

	a.ok("namespaces", "set-message-ttl", "acme/ns", "--ttl", "1h")
	if out := a.ok("namespaces", "get-message-ttl", "acme/ns"); out != "3600\n" {
		t.Fatalf("ttl: %q", out)
	}
	a.ok("namespaces", "remove-message-ttl", "acme/ns")
	if out := a.ok("namespaces", "get-message-ttl", "acme/ns"); out != "(not set)\n" {
		t.Fatalf("removed ttl: %q", out)
	}

	a.ok("namespaces", "set-backlog-quota", "acme/ns", "--limit-size", "1G", "--policy", "producer_exception")
	var quotas map[string]utils.BacklogQuota
	a.json(&quotas, "namespaces", "get-backlog-quotas", "acme/ns")
	if q := quotas["destination_storage"]; q.LimitSize != 1<<30 || q.Policy != utils.ProducerException {
		t.Fatalf("quotas: %+v", quotas)
	}
	wantContains(t, "quota table", a.ok("namespaces", "get-backlog-quotas", "acme/ns"), "destination_storage", "producer_exception")
	a.ok("namespaces", "remove-backlog-quota", "acme/ns")
	quotas = nil
	a.json(&quotas, "namespaces", "get-backlog-quotas", "acme/ns")
	if len(quotas) != 0 {
		t.Fatalf("removed quota: %+v", quotas)
	}

	a.ok("namespaces", "set-backlog-quota", "acme/ns", "--type", "message_age", "--limit-time", "1h", "--policy", "producer_request_hold")
	a.json(&quotas, "namespaces", "get-backlog-quotas", "acme/ns")
	if q := quotas["message_age"]; q.LimitTime != 3600 || q.LimitSize != -1 || q.Policy != utils.ProducerRequestHold {
		t.Fatalf("message_age quota: %+v", quotas)
	}
	a.ok("namespaces", "remove-backlog-quota", "acme/ns", "--type", "message_age")
	quotas = nil
	a.json(&quotas, "namespaces", "get-backlog-quotas", "acme/ns")
	if len(quotas) != 0 {
		t.Fatalf("removed message_age quota: %+v", quotas)
	}

	a.ok("namespaces", "set-deduplication", "acme/ns", "--enable")
	var pol utils.Policies
	a.json(&pol, "namespaces", "policies", "acme/ns")
	if pol.DeduplicationEnabled == nil || !*pol.DeduplicationEnabled {
		t.Fatalf("deduplication: %+v", pol.DeduplicationEnabled)
	}
	a.ok("namespaces", "set-clusters", "acme/ns", "--clusters", "standalone")
	if out := a.ok("namespaces", "get-clusters", "acme/ns"); out != "standalone\n" {
		t.Fatalf("get-clusters: %q", out)
	}
	wantContains(t, "set-clusters unknown", a.fails(1, "namespaces", "set-clusters", "acme/ns", "--clusters", "mars"), "mars")

	a.ok("namespaces", "grant-permission", "acme/ns", "--role", "app", "--actions", "produce,consume")
	if out := a.ok("namespaces", "permissions", "acme/ns"); out != "app: consume, produce\n" && out != "app: produce, consume\n" {
		t.Fatalf("permissions: %q", out)
	}
	a.ok("namespaces", "revoke-permission", "acme/ns", "--role", "app")
	var perms map[string][]string
	a.json(&perms, "namespaces", "permissions", "acme/ns")
	if len(perms) != 0 {
		t.Fatalf("revoked: %v", perms)
	}

	// Below the namespace: a topic's grants and a subscription's roles.
	a.ok("topics", "grant-permission", "persistent://acme/ns/orders", "--role", "app", "--actions", "produce")
	a.json(&perms, "topics", "permissions", "persistent://acme/ns/orders")
	if len(perms["app"]) != 1 || perms["app"][0] != "produce" {
		t.Fatalf("topic permissions: %v", perms)
	}
	a.ok("topics", "revoke-permission", "persistent://acme/ns/orders", "--role", "app")
	wantContains(t, "revoke twice", a.fails(1, "topics", "revoke-permission", "persistent://acme/ns/orders", "--role", "app"), "not set at the topic level")
	a.ok("namespaces", "grant-subscription-permission", "acme/ns", "--subscription", "billing", "--roles", "app,audit")
	var subs map[string][]string
	a.json(&subs, "namespaces", "subscription-permissions", "acme/ns")
	if len(subs["billing"]) != 2 {
		t.Fatalf("subscription permissions: %v", subs)
	}
	a.ok("namespaces", "revoke-subscription-permission", "acme/ns", "--subscription", "billing", "--role", "app")
	a.json(&subs, "namespaces", "subscription-permissions", "acme/ns")
	if len(subs["billing"]) != 1 || subs["billing"][0] != "audit" {
		t.Fatalf("after revoking app: %v", subs)
	}

	a.ok("namespaces", "set-max-producers-per-topic", "acme/ns", "--max-producers-per-topic", "5")
	a.ok("namespaces", "set-max-consumers-per-topic", "acme/ns", "--max-consumers-per-topic", "7")
	if p, c := a.ok("namespaces", "get-max-producers-per-topic", "acme/ns"), a.ok("namespaces", "get-max-consumers-per-topic", "acme/ns"); p != "5\n" || c != "7\n" {
		t.Fatalf("limits: %q %q", p, c)
	}
	a.ok("namespaces", "set-schema-compatibility-strategy", "acme/ns", "--compatibility", "backward")
	if out := a.ok("namespaces", "get-schema-compatibility-strategy", "acme/ns"); out != "BACKWARD\n" {
		t.Fatalf("strategy: %q", out)
	}
	if out := a.ok("namespaces", "topics", "acme/ns"); out != "" {
		t.Fatalf("topics of an empty namespace: %q", out)
	}
	a.ok("namespaces", "unload", "acme/ns")
	a.ok("namespaces", "create", "acme/two", "--clusters", "standalone")
	a.ok("namespaces", "delete", "acme/two")
	wantContains(t, "deleted namespace", a.fails(1, "namespaces", "policies", "acme/two"), "HTTP 404")
}

func adminTopics(a adminCLI, brokerURL string) {
	t := a.t
	a.ok("topics", "create-partitioned-topic", "pt", "-p", "3")
	a.ok("topics", "update-partitioned-topic", "pt", "--partitions", "4")
	var meta utils.PartitionedTopicMetadata
	a.json(&meta, "topics", "get-partitioned-topic-metadata", "public/default/pt")
	if meta.Partitions != 4 {
		t.Fatalf("metadata: %+v", meta)
	}
	wantContains(t, "list-partitioned-topics", a.ok("topics", "list-partitioned-topics", "public/default"), "persistent://public/default/pt\n")
	a.ok("topics", "create", "plain")
	wantContains(t, "topics list", a.ok("topics", "list", "public/default"), "persistent://public/default/plain\n")
	a.ok("topics", "update-properties", "plain", "--property", "team=ingest", "--property", "tier=gold")
	a.ok("topics", "remove-properties", "plain", "--key", "tier")
	if out := a.ok("topics", "get-properties", "plain"); out != "team=ingest\n" {
		t.Fatalf("topic properties: %q", out)
	}
	wantContains(t, "update-properties without one", a.fails(2, "topics", "update-properties", "plain"), "--property is required")
	adminTopicReplicatorDispatchRate(a)

	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: brokerURL, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "plain", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	a.ok("topics", "create-subscription", "plain", "--subscription", "sub", "--messageId", "earliest")
	for i := range 10 {
		if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i)),
			Properties: map[string]string{"n": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	backlog := func() int64 {
		var s utils.TopicStats
		a.json(&s, "topics", "stats", "plain")
		return s.Subscriptions["sub"].MsgBacklog
	}
	var st utils.TopicStats
	a.json(&st, "topics", "stats", "plain")
	if st.MsgCounterIn != 10 || st.Subscriptions["sub"].MsgBacklog != 10 {
		t.Fatalf("stats: in %d, subscriptions %+v", st.MsgCounterIn, st.Subscriptions)
	}
	wantContains(t, "stats text", a.ok("topics", "stats", "plain"), "msgInCounter: 10\n", "SUBSCRIPTION", "sub ")
	if out := a.ok("topics", "subscriptions", "plain"); out != "sub\n" {
		t.Fatalf("subscriptions: %q", out)
	}
	wantContains(t, "peek", a.ok("topics", "peek-messages", "plain", "--subscription", "sub", "--count", "2"),
		"Payload: m0\n", "Payload: m1\n", "Property n: 1\n")
	a.ok("topics", "skip", "plain", "--subscription", "sub", "--count", "3")
	if n := backlog(); n != 7 {
		t.Fatalf("backlog after skip 3: %d", n)
	}
	a.ok("topics", "clear-backlog", "plain", "--subscription", "sub")
	if n := backlog(); n != 0 {
		t.Fatalf("backlog after clear-backlog: %d", n)
	}
	a.ok("topics", "reset-cursor", "plain", "--subscription", "sub", "--time", "1h")
	if n := backlog(); n != 10 {
		t.Fatalf("backlog after reset-cursor --time 1h: %d", n)
	}
	a.ok("topics", "expire-messages", "plain", "--subscription", "sub", "--expireTime", "0")
	if n := backlog(); n != 0 {
		t.Fatalf("backlog after expire-messages 0: %d", n)
	}
	a.ok("topics", "reset-cursor", "plain", "--subscription", "sub", "--time", "1h")
	a.ok("topics", "expire-messages-all-subscriptions", "plain", "--expireTime", "0")
	if n := backlog(); n != 0 {
		t.Fatalf("backlog after expire-messages-all-subscriptions 0: %d", n)
	}

	var last utils.MessageID
	a.json(&last, "topics", "last-message-id", "plain")
	if out := a.ok("topics", "last-message-id", "plain"); out != fmt.Sprintf("%d:%d\n", last.LedgerID, last.EntryID) {
		t.Fatalf("last-message-id: %q, json %+v", out, last)
	}
	// By position (the last message is 10 entries after the first):
	// reset to it (-e: after it), expire up to it (--exclude: before it).
	lastID := fmt.Sprintf("%d:%d", last.LedgerID, last.EntryID)
	a.ok("topics", "reset-cursor", "plain", "--subscription", "sub", "--messageId", lastID)
	if n := backlog(); n != 1 {
		t.Fatalf("backlog after reset to the last message: %d, want 1", n)
	}
	a.ok("topics", "reset-cursor", "plain", "-s", "sub", "-m", lastID, "-e")
	if n := backlog(); n != 0 {
		t.Fatalf("backlog after reset -e to the last message: %d, want 0", n)
	}
	wantContains(t, "exclude with time", a.fails(2, "topics", "reset-cursor", "plain", "-s", "sub", "--time", "1h", "-e"), "--exclude goes with --messageId")
	a.ok("topics", "reset-cursor", "plain", "--subscription", "sub", "--messageId", "earliest")
	a.ok("topics", "expire-messages", "plain", "--subscription", "sub", "--position", lastID, "--exclude")
	if n := backlog(); n != 1 {
		t.Fatalf("backlog after expire-messages --position (excluded) the last: %d, want 1", n)
	}
	a.ok("topics", "reset-cursor", "plain", "--subscription", "sub", "--messageId", "earliest")
	if n := backlog(); n != 10 {
		t.Fatalf("backlog after reset to earliest: %d", n)
	}
	wantContains(t, "get-message-by-id", a.ok("topics", "get-message-by-id", "plain",
		"--ledger-id", fmt.Sprint(last.LedgerID), "--entry-id", fmt.Sprint(last.EntryID)), "Payload: m9\n")
	wantContains(t, "examine earliest", a.ok("topics", "examine-message", "plain", "--initialPosition", "earliest"), "Payload: m0\n")
	wantContains(t, "examine latest 2", a.ok("topics", "examine-message", "plain", "--messagePosition", "2"), "Payload: m8\n")
	var msgs []utils.Message
	a.json(&msgs, "topics", "examine-message", "plain")
	if len(msgs) != 1 || string(msgs[0].Payload) != "m9" || msgs[0].Properties["n"] != "9" {
		t.Fatalf("examine json: %+v", msgs)
	}

	var internal utils.PersistentTopicInternalStats
	a.json(&internal, "topics", "stats-internal", "plain")
	if internal.NumberOfEntries != 10 || len(internal.Cursors) != 1 {
		t.Fatalf("internal stats: %+v", internal)
	}
	wantContains(t, "stats-internal text", a.ok("topics", "stats-internal", "plain"), "numberOfEntries: 10\n", "CURSOR", "sub")

	var ps utils.PartitionedTopicStats
	a.json(&ps, "topics", "partitioned-stats", "pt", "--per-partition")
	if ps.Metadata.Partitions != 4 || len(ps.Partitions) != 4 {
		t.Fatalf("partitioned stats: %+v", ps)
	}
	wantContains(t, "partitioned-stats text", a.ok("topics", "partitioned-stats", "pt", "--per-partition"),
		"partitions: 4\n", "persistent://public/default/pt-partition-3")

	prod.Close()
	wantContains(t, "offload-status before", a.ok("topics", "offload-status", "plain"), "NOT_RUN", "First message on the bookies:")
	wantContains(t, "offload without a threshold", a.fails(2, "topics", "offload", "plain"), "--size-threshold is required")
	wantContains(t, "compaction-status before", a.ok("topics", "compaction-status", "plain"), "NOT_RUN")
	wantContains(t, "compact", a.ok("topics", "compact", "plain"), "Topic compaction requested")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.ok("topics", "compaction-status", "plain"), "SUCCESS") {
		if time.Now().After(deadline) {
			t.Fatalf("compaction-status: %q, want SUCCESS", a.ok("topics", "compaction-status", "plain"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.ok("topics", "unload", "plain")
	wantContains(t, "terminate", a.ok("topics", "terminate", "plain"), "Topic successfully terminated at ")
	a.ok("topics", "unsubscribe", "plain", "--subscription", "sub")
	// The compaction's cursor is listed, as Pulsar lists it.
	if out := a.ok("topics", "subscriptions", "plain"); out != "__compaction\n" {
		t.Fatalf("after unsubscribe: %q, want only __compaction", out)
	}
	wantContains(t, "stats of unknown topic", a.fails(1, "topics", "stats", "nosuch"), "HTTP 404")
	wantContains(t, "unknown subscription", a.fails(1, "topics", "skip", "plain", "--subscription", "nosub", "--count", "1"), "HTTP 404")
	// Deleting needs a managed-ledger factory that deletes (broker/admin_topics.go).
	if code, _, errOut := a.run("topics", "delete", "plain"); code != 0 {
		wantContains(t, "delete", errOut, "magnetar admin topics delete: ")
		t.Logf("topics delete: %s", errOut)
	}
	if code, _, errOut := a.run("topics", "delete-partitioned-topic", "pt"); code != 0 {
		wantContains(t, "delete-partitioned-topic", errOut, "magnetar admin topics delete-partitioned-topic: ")
		t.Logf("topics delete-partitioned-topic: %s", errOut)
	}
}

func adminBrokers(a adminCLI, brokerID string) {
	t := a.t
	if out := a.ok("brokers", "list", "standalone"); out != brokerID+"\n" {
		t.Fatalf("brokers list: %q", out)
	}
	wantContains(t, "brokers list of another cluster", a.fails(1, "brokers", "list", "mars"), "HTTP 404")
	// pulsaradmin's GetListActiveBrokers names no cluster: the local one's.
	adm, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: a.url})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := adm.Brokers().GetListActiveBrokers(); err != nil || len(ids) != 1 || ids[0] != brokerID {
		t.Fatalf("GET /admin/v2/brokers: %v %v, want [%s]", ids, err, brokerID)
	}
	var leader utils.BrokerInfo
	a.json(&leader, "brokers", "leader-broker")
	if leader.BrokerID == "" {
		t.Fatalf("leader: %+v", leader)
	}
	wantContains(t, "leader text", a.ok("brokers", "leader-broker"), "brokerId: ")
	if out := a.ok("brokers", "healthcheck"); out != "ok\n" {
		t.Fatalf("healthcheck: %q", out)
	}
	wantContains(t, "owned namespaces", a.ok("brokers", "namespaces", "standalone", "--url", brokerID), "BUNDLE", "public/default/0x")
	// The load report lists bundles with loaded topics: the topic tests
	// before this one deleted theirs.
	a.ok("topics", "create", "for-load-report")
	var report utils.LocalBrokerData
	a.json(&report, "broker-stats", "load-report")
	if report.WebServiceURL != a.url {
		t.Fatalf("load report: %+v", report)
	}
	wantContains(t, "load-report text", a.ok("broker-stats", "load-report"), "webServiceUrl: "+a.url+"\n", "BUNDLE", "public/default/0x")

	wantContains(t, "broker-stats topics", a.ok("broker-stats", "topics"), "persistent://public/default/for-load-report")
	wantContains(t, "monitoring metrics", a.ok("broker-stats", "monitoring-metrics"), "brk_no_of_topics")
	wantContains(t, "dynamic keys", a.ok("brokers", "list-dynamic-config"), "dispatcherMaxReadBatchSize\n")
	a.ok("brokers", "update-dynamic-config", "--config", "dispatcherMaxReadBatchSize", "--value", "42")
	if out := a.ok("brokers", "get-all-dynamic-config"); out != "dispatcherMaxReadBatchSize=42\n" {
		t.Fatalf("get-all-dynamic-config: %q", out)
	}
	// The broker applies the stored override when its watch fires.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(a.ok("brokers", "get-runtime-config"), "dispatcherMaxReadBatchSize=42\n"); {
		if time.Now().After(deadline) {
			t.Fatalf("runtime config never showed the override: %s", a.ok("brokers", "get-runtime-config"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantContains(t, "runtime config", a.ok("brokers", "get-runtime-config"), "clusterName=standalone\n")
	wantContains(t, "not dynamic", a.fails(1, "brokers", "update-dynamic-config", "--config", "clusterName", "--value", "x"),
		"HTTP 412", "not a dynamic configuration")
	a.ok("brokers", "delete-dynamic-config", "--config", "dispatcherMaxReadBatchSize")
	wantContains(t, "internal config", a.ok("brokers", "get-internal-config"), "local:")
}

// adminBundles splits and unloads a bundle the standalone owns.
func adminBundles(a adminCLI, brokerID string) {
	t := a.t
	ownedBundle := func() string {
		var owned map[string]utils.NamespaceOwnershipStatus
		a.json(&owned, "brokers", "namespaces", "standalone", "--url", brokerID)
		for b := range owned {
			if r, ok := strings.CutPrefix(b, "acme/ns/"); ok {
				return r
			}
		}
		t.Fatalf("no bundle of acme/ns owned: %v", owned)
		return ""
	}
	a.ok("topics", "create", "persistent://acme/ns/b")
	a.ok("namespaces", "split-bundle", "acme/ns", "--bundle", ownedBundle())
	if bundles := strings.Fields(a.ok("namespaces", "bundles", "acme/ns")); len(bundles) != 5 {
		t.Fatalf("after split: %q", bundles)
	}
	a.ok("topics", "stats", "persistent://acme/ns/b") // loads it again
	a.ok("namespaces", "unload", "acme/ns", "--bundle", ownedBundle())
	wantContains(t, "split of no bundle", a.fails(1, "namespaces", "split-bundle", "acme/ns", "--bundle", "0x1_0x2"), "HTTP 4")
}

// servesSchemas reports whether the broker at web serves the schema
// endpoints: a topic without a schema is a 404 with a reason, an
// unregistered route a plain 404.
func servesSchemas(t *testing.T, web string) bool {
	resp, err := http.Get(web + "/admin/v2/schemas/public/default/probe/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), "reason")
}

// schemaServer serves broker/schema's admin endpoints over a memory store.
func schemaServer(t *testing.T) string {
	st, err := metadata.Open(context.Background(), "memory:", metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg, err := schema.New(schema.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	reg.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func adminSchemas(a adminCLI) {
	t := a.t
	def := `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	file := filepath.Join(t.TempDir(), "schema.json")
	body, _ := json.Marshal(utils.PostSchemaPayload{SchemaType: "AVRO", Schema: def, Properties: map[string]string{"k": "v"}})
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	a.ok("schemas", "upload", "schemed", "--filename", file)
	var got utils.GetSchemaResponse
	a.json(&got, "schemas", "get", "schemed")
	if got.Type != "AVRO" || got.Data != def || got.Version != 0 || got.Properties["k"] != "v" {
		t.Fatalf("schema: %+v", got)
	}
	wantContains(t, "schemas get --version", a.ok("schemas", "get", "schemed", "--version", "0"), "version: 0\n", "type: AVRO\n", "schema: "+def)
	wantContains(t, "schemas get --all", a.ok("schemas", "get", "schemed", "--all"), "version: 0\n")
	wantContains(t, "compatibility", a.ok("schemas", "compatibility", "schemed", "--filename", file), "compatible: true")
	a.ok("schemas", "delete", "schemed")
	wantContains(t, "deleted schema", a.fails(1, "schemas", "get", "schemed"), "HTTP 404")
	wantContains(t, "bad file", a.fails(1, "schemas", "upload", "schemed", "--filename", filepath.Join(t.TempDir(), "none")), "no such file")
}

// Every pulsar-admin short flag (and long spelling) of a command we
// implement is accepted, as pulsar-admin's own scripts use them: the Go
// client's suite runs "tenants update public -r anonymous", refused
// before with "flag provided but not defined: -r".
func TestAdminAcceptsPulsarAdminFlagForms(t *testing.T) {
	want := map[string][]string{
		"tenants create":                           {"r", "c", "admin-roles", "allowed-clusters"},
		"tenants update":                           {"r", "c"},
		"namespaces create":                        {"b", "c", "bundles", "clusters"},
		"namespaces set-retention":                 {"s", "t"},
		"namespaces set-message-ttl":               {"ttl", "messageTTL"},
		"namespaces set-backlog-quota":             {"l", "limit", "lt", "limitTime", "p", "t"},
		"namespaces set-deduplication":             {"e", "d", "enable", "disable"},
		"namespaces split-bundle":                  {"b", "u"},
		"topics create-partitioned-topic":          {"p"},
		"topics delete":                            {"f"},
		"topics create-subscription":               {"s", "m"},
		"topics unsubscribe":                       {"s", "f"},
		"topics skip":                              {"s", "n"},
		"topics clear-backlog":                     {"s"},
		"topics reset-cursor":                      {"s", "t", "m"},
		"topics expire-messages":                   {"s", "t", "expireTime"},
		"topics expire-messages-all-subscriptions": {"t", "expireTime"},
		"topics peek-messages":                     {"s", "n"},
		"topics examine-message":                   {"i", "m", "initialPosition", "messagePosition"},
		"topics get-message-by-id":                 {"l", "e", "ledgerId", "entryId"},
	}
	flags := map[string]*flag.FlagSet{}
	for _, g := range adminGroups() {
		for _, c := range g.cmds {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.setup(fs)
			addShortFlags(fs)
			flags[g.name+" "+c.name] = fs
		}
	}
	for cmd, names := range want {
		fs, ok := flags[cmd]
		if !ok {
			t.Errorf("no command %q", cmd)
			continue
		}
		for _, n := range names {
			if fs.Lookup(n) == nil {
				t.Errorf("%s: pulsar-admin's -%s is not accepted", cmd, n)
			}
		}
	}
}

// adminTopicReplicatorDispatchRate: topics set-, get- and
// remove-replicator-dispatch-rate with pulsar-admin's flags; --applied
// shows the rate in force (the broker's when neither the topic nor its
// namespace has one).
func adminTopicReplicatorDispatchRate(a adminCLI) {
	t := a.t
	if out := a.ok("topics", "get-replicator-dispatch-rate", "plain"); out != "(not set)\n" {
		t.Fatalf("unset: %q", out)
	}
	var r resources.DispatchRate
	a.json(&r, "topics", "get-replicator-dispatch-rate", "plain", "--applied")
	if want := (resources.DispatchRate{RatePeriodInSecond: 1}); r != want {
		t.Fatalf("applied, unset: %+v, want the broker's %+v", r, want)
	}
	a.ok("topics", "set-replicator-dispatch-rate", "plain", "--msg-dispatch-rate", "100",
		"--byte-dispatch-rate", "1048576", "--dispatch-rate-period", "2", "--relative-to-publish-rate")
	want := resources.DispatchRate{DispatchThrottlingRateInMsg: 100, DispatchThrottlingRateInByte: 1 << 20, RatePeriodInSecond: 2, RelativeToPublishRate: true}
	for _, args := range [][]string{{"plain"}, {"plain", "--applied"}} {
		r = resources.DispatchRate{}
		a.json(&r, append([]string{"topics", "get-replicator-dispatch-rate"}, args...)...)
		if r != want {
			t.Fatalf("get %v: %+v, want %+v", args, r, want)
		}
	}
	wantContains(t, "bad period", a.fails(2, "topics", "set-replicator-dispatch-rate", "plain", "--dispatch-rate-period", "0"), "want 1 or more")
	a.ok("topics", "remove-replicator-dispatch-rate", "plain")
	if out := a.ok("topics", "get-replicator-dispatch-rate", "plain"); out != "(not set)\n" {
		t.Fatalf("after remove: %q", out)
	}
	// --global: the one for every cluster; it applies where a cluster has
	// none of its own, and is shown and removed on its own.
	a.ok("topics", "set-replicator-dispatch-rate", "plain", "--msg-dispatch-rate", "7", "--global")
	if out := a.ok("topics", "get-replicator-dispatch-rate", "plain"); out != "(not set)\n" {
		t.Fatalf("this cluster's after a global set: %q", out)
	}
	for _, args := range [][]string{{"plain", "--global"}, {"plain", "--applied"}} {
		r = resources.DispatchRate{}
		a.json(&r, append([]string{"topics", "get-replicator-dispatch-rate"}, args...)...)
		if r.DispatchThrottlingRateInMsg != 7 {
			t.Fatalf("get %v: %+v, want the global 7", args, r)
		}
	}
	a.ok("topics", "remove-replicator-dispatch-rate", "plain", "--global")
	if out := a.ok("topics", "get-replicator-dispatch-rate", "plain", "--global"); out != "(not set)\n" {
		t.Fatalf("global after remove: %q", out)
	}
}
