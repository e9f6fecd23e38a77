package resources

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Policies as a Pulsar broker writes them decode into the typed fields.
func TestPoliciesReadsPulsarJSON(t *testing.T) {
	var p Policies
	if err := json.Unmarshal(readTestdata(t, "pulsar-policies.json"), &p); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"namespace_auth", slices.Equal(p.AuthPolicies.NamespaceAuth["app1"], []AuthAction{ActionProduce, ActionConsume})},
		{"destination_auth", p.AuthPolicies.DestinationAuth["persistent://acme/orders/t1"]["app2"][0] == ActionConsume},
		{"replication_clusters", slices.Equal(p.ReplicationClusters, []string{"us-west"})},
		{"bundles", p.Bundles != nil && p.Bundles.NumBundles == 4 && p.Bundles.Boundaries[2] == "0x80000000"},
		{"backlog_quota_map", p.BacklogQuotaMap[DestinationStorage] == BacklogQuota{LimitSize: 10 << 30, LimitTime: -1, Policy: ProducerRequestHold}},
		{"retention_policies", *p.RetentionPolicies == RetentionPolicies{RetentionTimeInMinutes: 10080, RetentionSizeInMB: 20480}},
		{"message_ttl_in_seconds", *p.MessageTTLInSeconds == 3600},
		{"deduplicationEnabled", *p.DeduplicationEnabled},
		{"autoTopicCreationOverride", p.AutoTopicCreationOverride.TopicType == TopicTypePartitioned && *p.AutoTopicCreationOverride.DefaultNumPartitions == 3},
		{"max_producers_per_topic", *p.MaxProducersPerTopic == 10},
		{"max_consumers_per_topic", *p.MaxConsumersPerTopic == 20},
		{"max_consumers_per_subscription", *p.MaxConsumersPerSubscription == 5},
		{"max_unacked_messages_per_consumer", *p.MaxUnackedMessagesPerConsumer == 50000},
		{"schema_compatibility_strategy", p.SchemaCompatibilityStrategy == "BACKWARD"},
		{"is_allow_auto_update_schema", p.IsAllowAutoUpdateSchema != nil && !*p.IsAllowAutoUpdateSchema},
		{"persistence", p.Persistence != nil && p.Persistence.BookkeeperEnsemble > 0},
		{"replicatorDispatchRate", p.ReplicatorDispatchRate != nil && len(p.ReplicatorDispatchRate) == 0},
		{"properties", p.Properties["owner"] == "team-a"},
		{"topicDispatchRate", p.TopicDispatchRate["us-west"].DispatchThrottlingRateInMsg == 100},
		{"subscriptionDispatchRate", p.SubscriptionDispatchRate != nil && len(p.SubscriptionDispatchRate) == 0},
		{"publishMaxMessageRate", p.PublishMaxMessageRate != nil && len(p.PublishMaxMessageRate) == 0},
		{"clusterSubscribeRate", p.ClusterSubscribeRate != nil && len(p.ClusterSubscribeRate) == 0},
		{"extra", len(p.Extra) == 3 && p.Extra["clusterDispatchRate"] != nil},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s not decoded as written by Pulsar: %+v", c.name, p)
		}
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Pulsar's own policies do not validate: %v", err)
	}
}

// Decoding and encoding again keeps every member Pulsar wrote, modelled
// or not, with the same value.
func TestPoliciesRoundTripKeepsEverything(t *testing.T) {
	orig := readTestdata(t, "pulsar-policies.json")
	var p Policies
	if err := json.Unmarshal(orig, &p); err != nil {
		t.Fatal(err)
	}
	ttl := 60
	p.MessageTTLInSeconds = &ttl
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want, got := decodeMap(t, orig), decodeMap(t, out)
	want["message_ttl_in_seconds"] = float64(60)
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("%s: got %v, want %v", k, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: added %v", k, got[k])
			}
		}
	}
}

// What this package writes for a fresh namespace is what Java's new
// Policies() holds: collections present and empty, Java's enum defaults.
func TestNewPoliciesJSON(t *testing.T) {
	out, err := json.Marshal(Policies{})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeMap(t, out)
	for _, k := range []string{"replication_clusters", "backlog_quota_map", "auth_policies"} {
		if m[k] == nil {
			t.Errorf("%s written as null: %s", k, out)
		}
	}
	auth := m["auth_policies"].(map[string]any)
	if auth["namespace_auth"] == nil || auth["destination_auth"] == nil || auth["subscription_auth_roles"] == nil {
		t.Errorf("auth_policies maps written as null: %s", out)
	}
	var p Policies
	if err := json.Unmarshal([]byte(`{}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.OffloadThreshold != -1 || p.SchemaCompatibilityStrategy != "UNDEFINED" ||
		p.SchemaAutoUpdateCompatibilityStrategy != "" || p.SubscriptionAuthMode != "None" {
		t.Errorf("absent members did not take Java's defaults: %+v", p)
	}
}

// TestEffectiveSchemaCompatibilityStrategy: as Pulsar's namespace GET, an
// UNDEFINED strategy falls back to the deprecated auto-update strategy,
// which current Pulsar leaves unset (null) in new namespaces: a new
// namespace reads UNDEFINED, and the broker's default applies. A
// namespace stored with "Full" by an older release still reads FULL.
func TestEffectiveSchemaCompatibilityStrategy(t *testing.T) {
	p := NewPolicies()
	if got := p.EffectiveSchemaCompatibilityStrategy(); got != "UNDEFINED" {
		t.Errorf("a new namespace: %s, want UNDEFINED", got)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("a new namespace does not validate: %v", err)
	}
	out, _ := json.Marshal(p)
	if strings.Contains(string(out), "schema_auto_update_compatibility_strategy") {
		t.Errorf("an unset auto-update strategy was written: %s", out)
	}
	var old Policies
	if err := json.Unmarshal([]byte(`{"schema_auto_update_compatibility_strategy":"Full","schema_compatibility_strategy":"UNDEFINED"}`), &old); err != nil {
		t.Fatal(err)
	}
	if got := old.EffectiveSchemaCompatibilityStrategy(); got != "FULL" {
		t.Errorf("a namespace of an older release: %s, want FULL", got)
	}
	old.SchemaCompatibilityStrategy = "BACKWARD"
	if got := old.EffectiveSchemaCompatibilityStrategy(); got != "BACKWARD" {
		t.Errorf("a set strategy: %s, want BACKWARD", got)
	}
}

// pulsaradmin sends zero values and nulls for what it does not set; they
// must not reach the store as nulls or invalid enums.
func TestPoliciesFromPulsaradminBody(t *testing.T) {
	body := `{"bundles":{"boundaries":null,"numBundles":8},"persistence":null,"retention_policies":null,
		"schema_validation_enforced":false,"deduplicationEnabled":null,"deleted":false,"encryption_required":false,
		"message_ttl_in_seconds":null,"offload_threshold":0,"antiAffinityGroup":"","replication_clusters":null,
		"latency_stats_sample_rate":null,"backlog_quota_map":null,"topicDispatchRate":null,
		"autoTopicCreationOverride":null,"schema_auto_update_compatibility_strategy":"",
		"schema_compatibility_strategy":"","auth_policies":{"namespace_auth":null,"destination_auth":null,
		"subscription_auth_roles":null},"subscription_auth_mode":"","is_allow_auto_update_schema":null}`
	var p Policies
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Extra["topicDispatchRate"]; ok {
		t.Errorf("null unknown member kept: %v", p.Extra)
	}
	if p.SchemaCompatibilityStrategy != "UNDEFINED" || p.SubscriptionAuthMode != "None" {
		t.Errorf("empty enums not defaulted: %+v", p)
	}
	var err error
	if p.Bundles, err = completeBundles(p.Bundles, 4); err != nil || p.Bundles.NumBundles != 8 {
		t.Fatalf("bundles: %+v, %v", p.Bundles, err)
	}
	out, _ := json.Marshal(p)
	if strings.Contains(string(out), "null") {
		t.Errorf("encoded policies hold null: %s", out)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	neg, big, zero := -5, 1<<31, 0
	cases := []struct {
		mutate func(*Policies)
		want   string
	}{
		{func(p *Policies) {
			p.RetentionPolicies = &RetentionPolicies{RetentionTimeInMinutes: -5, RetentionSizeInMB: 1}
		},
			"retention_policies.retentionTimeInMinutes: must be >= -1, got -5"},
		{func(p *Policies) {
			p.RetentionPolicies = &RetentionPolicies{RetentionTimeInMinutes: 10, RetentionSizeInMB: -2}
		},
			"retention_policies.retentionSizeInMB: must be >= -1, got -2"},
		{func(p *Policies) {
			p.RetentionPolicies = &RetentionPolicies{RetentionTimeInMinutes: 0, RetentionSizeInMB: 10}
		},
			"retention_policies: a single limit of 0"},
		{func(p *Policies) { p.MessageTTLInSeconds = &neg }, "message_ttl_in_seconds: must be >= 0, got -5"},
		{func(p *Policies) { p.MaxProducersPerTopic = &big }, "max_producers_per_topic: must be <= 2147483647"},
		{func(p *Policies) { p.MaxConsumersPerTopic = &neg }, "max_consumers_per_topic: must be >= 0"},
		{func(p *Policies) { p.MaxUnackedMessagesPerConsumer = &neg }, "max_unacked_messages_per_consumer: must be >= 0"},
		{func(p *Policies) { p.BacklogQuotaMap["bogus"] = BacklogQuota{Policy: ProducerException} }, "backlog_quota_map: unknown backlog quota type"},
		{func(p *Policies) { p.BacklogQuotaMap[DestinationStorage] = BacklogQuota{LimitSize: 1, Policy: "drop"} },
			"backlog_quota_map.destination_storage.policy: unknown policy"},
		{func(p *Policies) {
			p.BacklogQuotaMap[MessageAge] = BacklogQuota{LimitTime: -7, Policy: ProducerException}
		},
			"backlog_quota_map.message_age.limitTime: must be >= -1, got -7"},
		{func(p *Policies) {
			p.BacklogQuotaMap[DestinationStorage] = BacklogQuota{LimitSize: 2 << 20, LimitTime: -1, Policy: ProducerException}
			p.RetentionPolicies = &RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: 1}
		}, "retention_policies.retentionSizeInMB: must exceed the destination_storage backlog quota"},
		{func(p *Policies) { p.AuthPolicies.NamespaceAuth["r"] = []AuthAction{"fly"} }, `auth_policies.namespace_auth.r[0]: unknown action "fly"`},
		{func(p *Policies) { p.ReplicationClusters = []string{"ok", "bad name"} }, "replication_clusters[1]: invalid name"},
		{func(p *Policies) {
			p.Bundles = &BundlesData{Boundaries: []string{FirstBoundary, "0x10"}, NumBundles: 1}
		},
			"bundles.boundaries: must start at 0x00000000 and end at 0xffffffff"},
		{func(p *Policies) {
			p.AutoTopicCreationOverride = &AutoTopicCreationOverride{AllowAutoTopicCreation: true, TopicType: "partitioned"}
		},
			"[defaultNumPartitions] cannot be null when the type is partitioned."},
		{func(p *Policies) {
			p.AutoTopicCreationOverride = &AutoTopicCreationOverride{AllowAutoTopicCreation: true, TopicType: "partitioned", DefaultNumPartitions: &zero}
		}, "[defaultNumPartitions] cannot be less than 1 for partition type."},
		{func(p *Policies) {
			p.AutoTopicCreationOverride = &AutoTopicCreationOverride{AllowAutoTopicCreation: true, TopicType: "x"}
		},
			"autoTopicCreationOverride.topicType: unknown topic type"},
		{func(p *Policies) { p.SchemaCompatibilityStrategy = "SOMETIMES" }, "schema_compatibility_strategy: unknown strategy"},
	}
	for _, c := range cases {
		p := NewPolicies()
		c.mutate(&p)
		err := p.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want ErrInvalid containing %q", err, c.want)
		}
	}
}

func TestBacklogQuotaReadsDeprecatedLimit(t *testing.T) {
	var q BacklogQuota
	if err := json.Unmarshal([]byte(`{"limit":1024,"limitTime":-1,"policy":"producer_exception"}`), &q); err != nil {
		t.Fatal(err)
	}
	if q.LimitSize != 1024 {
		t.Fatalf("limit not read as limitSize: %+v", q)
	}
	out, _ := json.Marshal(q)
	if m := decodeMap(t, out); m["limit"] != float64(1024) || m["limitSize"] != float64(1024) {
		t.Fatalf("want both limit and limitSize written: %s", out)
	}
}

func TestClusterAndTenantReadPulsarJSON(t *testing.T) {
	var c ClusterData
	raw := readTestdata(t, "pulsar-cluster.json")
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.ServiceURL != "http://broker.us-west:8080" || c.BrokerServiceURL != "pulsar://broker.us-west:6650" ||
		!slices.Equal(c.PeerClusterNames, []string{"us-east"}) || c.Validate() != nil {
		t.Fatalf("cluster: %+v", c)
	}
	out, _ := json.Marshal(c)
	if !reflect.DeepEqual(decodeMap(t, out), decodeMap(t, raw)) {
		t.Fatalf("cluster round trip changed it:\n%s\n%s", out, raw)
	}
	var ti TenantInfo
	if err := json.Unmarshal(readTestdata(t, "pulsar-tenant.json"), &ti); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ti.AdminRoles, []string{"acme-admin"}) || !slices.Equal(ti.AllowedClusters, []string{"us-west"}) {
		t.Fatalf("tenant: %+v", ti)
	}
}

func TestClusterValidateURLs(t *testing.T) {
	cases := map[string]ClusterData{
		"serviceUrl":          {ServiceURL: "pulsar://h:8080"},
		"serviceUrlTls":       {ServiceURLTLS: "http://h:8443"},
		"brokerServiceUrl":    {BrokerServiceURL: "http://h:6650"},
		"brokerServiceUrlTls": {BrokerServiceURLTLS: "pulsar://h:6651"},
		"proxyServiceUrl":     {ProxyServiceURL: "h:4443"},
	}
	for field, c := range cases {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: got %v", field, err)
		}
	}
	ok := ClusterData{ServiceURL: "http://h1:8080,h2:8080", BrokerServiceURL: "pulsar://h1:6650,h2:6650"}
	if err := ok.Validate(); err != nil {
		t.Errorf("multi-host URLs: %v", err)
	}
}

func decodeMap(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Pulsar's JSON reader (Jackson) takes a number written as a string, and
// the Go client's own suite sets a quota that way:
// {"limit": "10240", "policy": "producer_request_hold"}. It was refused
// with 400, so the quota was silently not set.
func TestBacklogQuotaReadsNumbersWrittenAsStrings(t *testing.T) {
	var q BacklogQuota
	if err := json.Unmarshal([]byte(`{"limit": "10240", "limitTime": "-1", "policy": "producer_request_hold"}`), &q); err != nil {
		t.Fatal(err)
	}
	if q.LimitSize != 10240 || q.LimitTime != -1 || q.Policy != ProducerRequestHold {
		t.Fatalf("got %+v", q)
	}
	for _, bad := range []string{`{"limit": "ten"}`, `{"limitSize": "1.5"}`, `{"limitTime": true}`} {
		if err := json.Unmarshal([]byte(bad), &q); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// A DispatchRate body that leaves members out gets Java's defaults (no
// limit, 1 s); a period under a second is refused.
func TestDispatchRateDefaults(t *testing.T) {
	var d DispatchRate
	if err := json.Unmarshal([]byte(`{"dispatchThrottlingRateInMsg":5}`), &d); err != nil {
		t.Fatal(err)
	}
	if want := (DispatchRate{DispatchThrottlingRateInMsg: 5, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}); d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	p := NewPolicies()
	p.ReplicatorDispatchRate = map[string]DispatchRate{"a": {RatePeriodInSecond: 0}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "replicatorDispatchRate.a.ratePeriodInSecond") {
		t.Fatalf("period 0: %v", err)
	}
}
