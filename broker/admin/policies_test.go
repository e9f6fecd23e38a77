package admin_test

import (
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// nsEnv is an env with namespace t/ns and its name in pulsaradmin's forms.
func nsEnv(t *testing.T) (*env, utils.NameSpaceName) {
	e := newEnv(t).withTenant()
	e.ok(e.pa.Namespaces().CreateNamespace("t/ns"))
	name, err := utils.GetNamespaceName("t/ns")
	e.ok(err)
	return e, *name
}

func TestRetention(t *testing.T) {
	e, _ := nsEnv(t)
	ns := e.pa.Namespaces()
	got, err := ns.GetRetention("t/ns")
	if err != nil || got != nil {
		t.Fatalf("unset retention = %+v, %v", got, err)
	}
	e.ok(ns.SetRetention("t/ns", utils.NewRetentionPolicies(60, 1024)))
	got, err = ns.GetRetention("t/ns")
	if err != nil || got.RetentionTimeInMinutes != 60 || got.RetentionSizeInMB != 1024 {
		t.Fatalf("GetRetention = %+v, %v", got, err)
	}
	e.status(ns.SetRetention("t/ns", utils.NewRetentionPolicies(-5, 10)), 400,
		"retention_policies.retentionTimeInMinutes: must be >= -1, got -5")
	e.status(ns.SetRetention("t/ns", utils.NewRetentionPolicies(10, 0)), 400, "retention_policies: a single limit of 0")
	e.want("POST", "/admin/v2/namespaces/t/ns/retention", `{"retentionSizeInMB": "big"}`, 400,
		"retention_policies.retentionSizeInMB: want int64")
	e.ok(ns.RemoveRetention("t/ns"))
	if got, _ = ns.GetRetention("t/ns"); got != nil {
		t.Fatalf("after remove: %+v", got)
	}
	e.status(ns.SetRetention("t/none", utils.NewRetentionPolicies(1, 1)), 404, "Namespace does not exist")
}

func TestBacklogQuota(t *testing.T) {
	e, _ := nsEnv(t)
	ns := e.pa.Namespaces()
	m, err := ns.GetBacklogQuotaMap("t/ns")
	if err != nil || len(m) != 0 {
		t.Fatalf("unset quotas = %v, %v", m, err)
	}
	e.ok(ns.SetBacklogQuota("t/ns", utils.NewBacklogQuota(1<<30, -1, utils.ProducerRequestHold), utils.DestinationStorage))
	e.ok(ns.SetBacklogQuota("t/ns", utils.NewBacklogQuota(-1, 3600, utils.ProducerException), utils.MessageAge))
	m, err = ns.GetBacklogQuotaMap("t/ns")
	e.ok(err)
	if q := m[utils.DestinationStorage]; q.LimitSize != 1<<30 || q.LimitTime != -1 || q.Policy != utils.ProducerRequestHold {
		t.Fatalf("destination_storage = %+v", q)
	}
	if q := m[utils.MessageAge]; q.LimitTime != 3600 || q.Policy != utils.ProducerException {
		t.Fatalf("message_age = %+v", q)
	}
	e.status(ns.SetBacklogQuota("t/ns", utils.NewBacklogQuota(1, -1, "drop"), utils.DestinationStorage), 400,
		"backlog_quota_map.destination_storage.policy: unknown policy")
	e.status(ns.SetBacklogQuota("t/ns", utils.NewBacklogQuota(1, -1, utils.ProducerException), "weird"), 400,
		"backlogQuotaType: unknown type")
	// Retention must outlast the size quota (1 GiB): 512 MB does not.
	e.status(ns.SetRetention("t/ns", utils.NewRetentionPolicies(-1, 512)), 400,
		"retention_policies.retentionSizeInMB: must exceed the destination_storage backlog quota")
	e.ok(ns.RemoveBacklogQuota("t/ns"))
	e.want("DELETE", "/admin/v2/namespaces/t/ns/backlogQuota?backlogQuotaType=message_age", "", 204, "")
	if m, _ = ns.GetBacklogQuotaMap("t/ns"); len(m) != 0 {
		t.Fatalf("after removes: %v", m)
	}
}

func TestMessageTTL(t *testing.T) {
	e, _ := nsEnv(t)
	ns := e.pa.Namespaces()
	if got, err := ns.GetNamespaceMessageTTL("t/ns"); err != nil || got != -1 {
		t.Fatalf("unset TTL = %d, %v (pulsaradmin's -1 when the broker answers nothing)", got, err)
	}
	e.want("GET", "/admin/v2/namespaces/t/ns/messageTTL", "", 204, "")
	e.ok(ns.SetNamespaceMessageTTL("t/ns", 3600))
	if got, err := ns.GetNamespaceMessageTTL("t/ns"); err != nil || got != 3600 {
		t.Fatalf("TTL = %d, %v", got, err)
	}
	e.status(ns.SetNamespaceMessageTTL("t/ns", -1), 400, "message_ttl_in_seconds: must be >= 0, got -1")
	e.want("POST", "/admin/v2/namespaces/t/ns/messageTTL", "", 400, "message_ttl_in_seconds: request body is required")
	e.want("POST", "/admin/v2/namespaces/t/ns/messageTTL", `"1h"`, 400, "message_ttl_in_seconds: want int")
	e.ok(ns.RemoveNamespaceMessageTTL("t/ns"))
	if got, _ := ns.GetNamespaceMessageTTL("t/ns"); got != -1 {
		t.Fatalf("after remove: %d", got)
	}
}

func TestDeduplication(t *testing.T) {
	e, _ := nsEnv(t)
	e.want("GET", "/admin/v2/namespaces/t/ns/deduplication", "", 204, "")
	e.ok(e.pa.Namespaces().SetDeduplicationStatus("t/ns", true))
	e.want("GET", "/admin/v2/namespaces/t/ns/deduplication", "", 200, "true")
	e.want("DELETE", "/admin/v2/namespaces/t/ns/deduplication", "", 204, "")
	e.want("GET", "/admin/v2/namespaces/t/ns/deduplication", "", 204, "")
	e.want("POST", "/admin/v2/namespaces/t/ns/deduplication", `"yes"`, 400, "deduplicationEnabled: want bool")
}

func TestReplication(t *testing.T) {
	e, _ := nsEnv(t)
	ns := e.pa.Namespaces()
	got, err := ns.GetNamespaceReplicationClusters("t/ns")
	if err != nil || !slices.Equal(got, []string{"standalone"}) {
		t.Fatalf("replication = %v, %v", got, err)
	}
	e.status(ns.SetNamespaceReplicationClusters("t/ns", []string{"nowhere"}), 403, "cluster nowhere does not exist")
	e.status(ns.SetNamespaceReplicationClusters("t/ns", []string{"other"}), 403,
		"cluster other is not in the list of allowed clusters of tenant t")
	e.status(ns.SetNamespaceReplicationClusters("t/ns", []string{}), 412, "replication_clusters: must not be empty")
	e.status(ns.SetNamespaceReplicationClusters("t/ns", []string{"global"}), 412, "cannot specify global")
	e.ok(e.pa.Tenants().Update(utils.TenantData{Name: "t", AllowedClusters: []string{"standalone", "other"}}))
	e.ok(ns.SetNamespaceReplicationClusters("t/ns", []string{"other", "standalone"}))
	if got, _ = ns.GetNamespaceReplicationClusters("t/ns"); !slices.Equal(got, []string{"other", "standalone"}) {
		t.Fatalf("replication = %v", got)
	}
}

func TestPermissions(t *testing.T) {
	e, name := nsEnv(t)
	ns := e.pa.Namespaces()
	perms, err := ns.GetNamespacePermissions(name)
	if err != nil || len(perms) != 0 {
		t.Fatalf("no permissions = %v, %v", perms, err)
	}
	produce, _ := utils.ParseAuthAction("produce")
	consume, _ := utils.ParseAuthAction("consume")
	e.ok(ns.GrantNamespacePermission(name, "app", []utils.AuthAction{consume, produce}))
	e.ok(ns.GrantNamespacePermission(name, "reader", []utils.AuthAction{consume}))
	perms, err = ns.GetNamespacePermissions(name)
	e.ok(err)
	if !slices.Equal(perms["app"], []utils.AuthAction{consume, produce}) || !slices.Equal(perms["reader"], []utils.AuthAction{consume}) {
		t.Fatalf("permissions = %v", perms)
	}
	e.want("POST", "/admin/v2/namespaces/t/ns/permissions/app", `["fly"]`, 400,
		`auth_policies.namespace_auth.app[0]: unknown action \"fly\"`)
	e.ok(ns.RevokeNamespacePermission(name, "app"))
	if perms, _ = ns.GetNamespacePermissions(name); len(perms) != 1 {
		t.Fatalf("after revoke: %v", perms)
	}
}

func TestAutoTopicCreation(t *testing.T) {
	e, name := nsEnv(t)
	ns := e.pa.Namespaces()
	got, err := ns.GetTopicAutoCreation(name)
	if err != nil || got != nil {
		t.Fatalf("unset = %+v, %v", got, err)
	}
	three := 3
	e.ok(ns.SetTopicAutoCreation(name, utils.TopicAutoCreationConfig{Allow: true, Type: utils.Partitioned, Partitions: &three}))
	got, err = ns.GetTopicAutoCreation(name)
	if err != nil || !got.Allow || got.Type != utils.Partitioned || got.Partitions == nil || *got.Partitions != 3 {
		t.Fatalf("GetTopicAutoCreation = %+v, %v", got, err)
	}
	e.status(ns.SetTopicAutoCreation(name, utils.TopicAutoCreationConfig{Allow: true, Type: utils.Partitioned}), 400,
		"the detail is [defaultNumPartitions] cannot be null when the type is partitioned.")
	e.status(ns.SetTopicAutoCreation(name, utils.TopicAutoCreationConfig{Allow: true, Type: utils.NonPartitioned, Partitions: &three}), 400,
		"[defaultNumPartitions] is not allowed to be set when the type is non-partition.")
	e.ok(ns.RemoveTopicAutoCreation(name))
	if got, _ = ns.GetTopicAutoCreation(name); got != nil {
		t.Fatalf("after remove: %+v", got)
	}
	// A missing namespace or tenant, in Pulsar's words (tools match them).
	for nsName, reason := range map[string]string{"t/missing": "Namespace does not exist", "missing/ns": "Tenant does not exist"} {
		n, _ := utils.GetNamespaceName(nsName)
		e.status(ns.SetTopicAutoCreation(*n, utils.TopicAutoCreationConfig{Allow: false}), 404, reason)
		_, err := ns.GetTopicAutoCreation(*n)
		e.status(err, 404, reason)
	}
}

func TestLimits(t *testing.T) {
	e, name := nsEnv(t)
	ns := e.pa.Namespaces()
	if got, err := ns.GetMaxProducersPerTopic(name); err != nil || got != -1 {
		t.Fatalf("unset = %d, %v", got, err)
	}
	e.ok(ns.SetMaxProducersPerTopic(name, 5))
	e.ok(ns.SetMaxConsumersPerTopic(name, 7))
	if p, _ := ns.GetMaxProducersPerTopic(name); p != 5 {
		t.Fatalf("max producers = %d", p)
	}
	if c, _ := ns.GetMaxConsumersPerTopic(name); c != 7 {
		t.Fatalf("max consumers = %d", c)
	}
	e.status(ns.SetMaxConsumersPerTopic(name, -3), 400, "max_consumers_per_topic: must be >= 0, got -3")
	e.ok(ns.RemoveMaxProducersPerTopic(name))
	e.ok(ns.RemoveMaxConsumersPerTopic(name))
	if p, _ := ns.GetMaxProducersPerTopic(name); p != -1 {
		t.Fatalf("after remove: %d", p)
	}
	const path = "/admin/v2/namespaces/t/ns/maxUnackedMessagesPerConsumer"
	e.want("GET", path, "", 204, "")
	e.want("POST", path, "1000", 204, "")
	e.want("GET", path, "", 200, "1000")
	e.want("POST", path, "-1", 400, "max_unacked_messages_per_consumer: must be >= 0")
	e.want("DELETE", path, "", 204, "")
	e.want("GET", path, "", 204, "")
	const subs = "/admin/v2/namespaces/t/ns/maxSubscriptionsPerTopic"
	e.want("GET", subs, "", 204, "")
	e.want("POST", subs, "2", 204, "")
	e.want("GET", subs, "", 200, "2")
	e.want("POST", subs, "-2", 400, "max_subscriptions_per_topic: must be >= 0")
	e.want("DELETE", subs, "", 204, "")
	e.want("GET", subs, "", 204, "")
	const dedup = "/admin/v2/namespaces/t/ns/deduplicationSnapshotInterval"
	e.want("POST", dedup, "60", 204, "")
	e.want("GET", dedup, "", 200, "60")
	e.want("POST", dedup, "-1", 400, "deduplicationSnapshotIntervalSeconds: must be >= 0")
	e.want("POST", dedup, "", 204, "") // pulsar-admin's remove
	e.want("GET", dedup, "", 204, "")
}

func TestSchemaPolicies(t *testing.T) {
	e, name := nsEnv(t)
	ns := e.pa.Namespaces()
	// Unset, current Pulsar reads UNDEFINED: the deprecated auto-update
	// strategy it would fall back to is null in new namespaces (Pulsar 2.x
	// defaulted it to Full and read FULL here).
	if s, err := ns.GetSchemaCompatibilityStrategy(name); err != nil || s != utils.SchemaCompatibilityStrategyUndefined {
		t.Fatalf("default strategy = %v, %v", s, err)
	}
	e.ok(ns.SetSchemaCompatibilityStrategy(name, utils.SchemaCompatibilityStrategyBackwardTransitive))
	if s, err := ns.GetSchemaCompatibilityStrategy(name); err != nil || s != utils.SchemaCompatibilityStrategyBackwardTransitive {
		t.Fatalf("strategy = %v, %v", s, err)
	}
	e.want("PUT", "/admin/v2/namespaces/t/ns/schemaCompatibilityStrategy", `"SOMETIMES"`, 400,
		"schema_compatibility_strategy: unknown strategy")
	e.want("GET", "/admin/v2/namespaces/t/ns/isAllowAutoUpdateSchema", "", 204, "")
	e.ok(ns.SetIsAllowAutoUpdateSchema(name, false))
	e.want("GET", "/admin/v2/namespaces/t/ns/isAllowAutoUpdateSchema", "", 200, "false")
	e.ok(ns.SetIsAllowAutoUpdateSchema(name, true))
	if ok, err := ns.GetIsAllowAutoUpdateSchema(name); err != nil || !ok {
		t.Fatalf("isAllowAutoUpdateSchema = %v, %v", ok, err)
	}
	p, err := ns.GetPolicies("t/ns")
	e.ok(err)
	if p.SchemaCompatibilityStrategy != utils.SchemaCompatibilityStrategyBackwardTransitive || p.IsAllowAutoUpdateSchema == nil || !*p.IsAllowAutoUpdateSchema {
		t.Fatalf("policies = %+v", p)
	}
}

// TestPersistenceAndBookieAffinity: a namespace's persistence policies and
// bookie affinity groups, as pulsaradmin sets and reads them (Pulsar's
// JSON members "persistence" and "bookieAffinityGroup").
func TestPersistenceAndBookieAffinity(t *testing.T) {
	e, _ := nsEnv(t)
	ns := e.pa.Namespaces()
	if got, err := ns.GetPersistence("t/ns"); err != nil || got != nil {
		t.Fatalf("unset persistence = %+v, %v", got, err)
	}
	e.ok(ns.SetPersistence("t/ns", utils.NewPersistencePolicies(3, 3, 2, 5)))
	got, err := ns.GetPersistence("t/ns")
	if err != nil || *got != utils.NewPersistencePolicies(3, 3, 2, 5) {
		t.Fatalf("GetPersistence = %+v, %v", got, err)
	}
	e.status(ns.SetPersistence("t/ns", utils.NewPersistencePolicies(2, 3, 2, 0)), 400, "Bookkeeper Ensemble (2) >= WriteQuorum (3)")
	e.status(ns.SetPersistence("t/ns", utils.NewPersistencePolicies(3, 3, 0, 0)), 400, "AckQuorum (0) >= 1")
	e.want("GET", "/admin/v2/namespaces/t/ns/persistence", "", 200, `"bookkeeperAckQuorum":2`)
	e.ok(ns.RemovePersistence("t/ns"))
	if got, _ := ns.GetPersistence("t/ns"); got != nil {
		t.Fatalf("after remove: %+v", got)
	}

	if got, err := ns.GetBookieAffinityGroup("t/ns"); err != nil || got != nil {
		t.Fatalf("unset affinity = %+v, %v", got, err)
	}
	e.ok(ns.SetBookieAffinityGroup("t/ns", utils.BookieAffinityGroupData{BookkeeperAffinityGroupPrimary: "eu",
		BookkeeperAffinityGroupSecondary: "us"}))
	g, err := ns.GetBookieAffinityGroup("t/ns")
	if err != nil || g.BookkeeperAffinityGroupPrimary != "eu" || g.BookkeeperAffinityGroupSecondary != "us" {
		t.Fatalf("GetBookieAffinityGroup = %+v, %v", g, err)
	}
	e.want("GET", "/admin/v2/namespaces/t/ns", "", 200, `"bookieAffinityGroup":{"bookkeeperAffinityGroupPrimary":"eu"`)
	e.status(ns.SetBookieAffinityGroup("t/ns", utils.BookieAffinityGroupData{}), 400, "bookkeeperAffinityGroupPrimary: is required")
	e.ok(ns.DeleteBookieAffinityGroup("t/ns"))
	if g, _ := ns.GetBookieAffinityGroup("t/ns"); g != nil {
		t.Fatalf("after delete: %+v", g)
	}
}

// Namespace properties: PUT merges, GET answers them ({} when none),
// DELETE removes all; pulsaradmin's Namespaces() properties calls.
func TestNamespaceProperties(t *testing.T) {
	e, _ := nsEnv(t)
	ns := e.pa.Namespaces()
	name, err := utils.GetNamespaceName("t/ns")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ns.GetProperties(*name)
	if err != nil || len(got) != 0 || got == nil {
		t.Fatalf("properties before any: %#v %v, want {}", got, err)
	}
	e.ok(ns.UpdateProperties(*name, map[string]string{"team": "a", "tier": "1"}))
	e.ok(ns.UpdateProperties(*name, map[string]string{"tier": "2"}))
	got, err = ns.GetProperties(*name)
	if err != nil || len(got) != 2 || got["team"] != "a" || got["tier"] != "2" {
		t.Fatalf("properties after two updates: %v %v", got, err)
	}
	e.want("PUT", "/admin/v2/namespaces/t/ns/properties", `{"tier": 3}`, 400, "properties")
	e.ok(ns.RemoveProperties(*name))
	if got, err = ns.GetProperties(*name); err != nil || len(got) != 0 {
		t.Fatalf("properties after remove: %v %v", got, err)
	}
}

// Namespace policies this broker does not enforce answer 501 naming them,
// on every method, instead of a bare 404 or a setting nothing applies.
func TestUnsupportedNamespacePolicies(t *testing.T) {
	e, _ := nsEnv(t)
	e.want("POST", "/admin/v2/namespaces/t/ns/inactiveTopicPolicies", `{"deleteWhileInactive": true}`, 501,
		"namespace policy inactiveTopicPolicies: inactive topic deletion is not supported")
	e.want("GET", "/admin/v2/namespaces/t/ns/encryptionRequired", "", 501, "refusing unencrypted messages")
}

// compactionThreshold: unset answers nothing (pulsaradmin reads -1), PUT
// sets it (0 too), a negative value is 412, DELETE unsets it.
func TestNamespaceCompactionThreshold(t *testing.T) {
	e, name := nsEnv(t)
	ns := e.pa.Namespaces()
	get := func(want int64) {
		t.Helper()
		if v, err := ns.GetCompactionThreshold(name); err != nil || v != want {
			t.Fatalf("compactionThreshold %d %v, want %d", v, err, want)
		}
	}
	get(-1)
	e.ok(ns.SetCompactionThreshold(name, 0))
	get(0)
	e.ok(ns.SetCompactionThreshold(name, 1<<20))
	get(1 << 20)
	e.want("PUT", "/admin/v2/namespaces/t/ns/compactionThreshold", "-5", 412, "compactionThreshold must be 0 or more")
	get(1 << 20)
	e.want("DELETE", "/admin/v2/namespaces/t/ns/compactionThreshold", "", 204, "")
	get(-1)
}

// The namespace's tiered storage settings: thresholds default to -1, a
// threshold in seconds below -1 is refused in Pulsar's words, the
// deletion lag can be set and cleared, offload policies naming a driver
// Pulsar does not know are refused (412) and removed at Pulsar's path.
func TestNamespaceOffloadPolicies(t *testing.T) {
	e, name := nsEnv(t)
	ns := e.pa.Namespaces()
	if v, err := ns.GetOffloadThreshold(name); err != nil || v != -1 {
		t.Fatalf("offloadThreshold %d %v, want -1", v, err)
	}
	if v, err := ns.GetOffloadThresholdInSeconds(name); err != nil || v != -1 {
		t.Fatalf("offloadThresholdInSeconds %d %v, want -1", v, err)
	}
	e.ok(ns.SetOffloadThreshold(name, 1<<30))
	e.ok(ns.SetOffloadThresholdInSeconds(name, 60))
	if v, err := ns.GetOffloadThreshold(name); err != nil || v != 1<<30 {
		t.Fatalf("offloadThreshold %d %v after set", v, err)
	}
	if v, err := ns.GetOffloadThresholdInSeconds(name); err != nil || v != 60 {
		t.Fatalf("offloadThresholdInSeconds %d %v after set", v, err)
	}
	e.want("PUT", "/admin/v2/namespaces/t/ns/offloadThresholdInSeconds", "-60", 412, "Invalid value for offloadThresholdInSecond")
	if v, err := ns.GetOffloadDeleteLag(name); err != nil || v != -1 {
		t.Fatalf("offloadDeletionLagMs %d %v, want -1 (unset)", v, err)
	}
	e.ok(ns.SetOffloadDeleteLag(name, 1000))
	if v, err := ns.GetOffloadDeleteLag(name); err != nil || v != 1000 {
		t.Fatalf("offloadDeletionLagMs %d %v after set", v, err)
	}
	e.want("DELETE", "/admin/v2/namespaces/t/ns/offloadDeletionLagMs", "", 204, "")
	e.want("POST", "/admin/v2/namespaces/t/ns/offloadPolicies", `{"managedLedgerOffloadDriver": "floppy"}`, 412, "floppy")
	e.want("POST", "/admin/v2/namespaces/t/ns/offloadPolicies",
		`{"managedLedgerOffloadDriver": "filesystem", "managedLedgerOffloadThresholdInBytes": 0, "fileSystemURI": "file:///x"}`, 204, "")
	e.want("GET", "/admin/v2/namespaces/t/ns/offloadPolicies", "", 200, `"fileSystemURI":"file:///x"`)
	e.want("DELETE", "/admin/v2/namespaces/t/ns/removeOffloadPolicies", "", 204, "")
	e.want("GET", "/admin/v2/namespaces/t/ns/offloadPolicies", "", 204, "")
}
