package admin_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func TestNamespaceCreate(t *testing.T) {
	e := newEnv(t).withTenant()
	ns := e.pa.Namespaces()
	e.ok(ns.CreateNamespace("t/ns"))
	p, err := ns.GetPolicies("t/ns")
	e.ok(err)
	if !slices.Equal(p.ReplicationClusters, []string{"standalone"}) || p.Bundles == nil || p.Bundles.NumBundles != 4 ||
		!slices.Equal(p.Bundles.Boundaries, []string{"0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"}) {
		t.Fatalf("default policies: %+v bundles %+v", p, p.Bundles)
	}
	e.status(ns.CreateNamespace("t/ns"), 409, "namespace t/ns already exists")
	e.status(ns.CreateNamespace("nobody/ns"), 404, "tenant nobody does not exist")

	e.ok(ns.CreateNsWithNumBundles("t/eight", 8))
	if p, _ = ns.GetPolicies("t/eight"); p.Bundles.NumBundles != 8 || p.Bundles.Boundaries[1] != "0x20000000" {
		t.Fatalf("8 bundles: %+v", p.Bundles)
	}
	custom := utils.NewBundlesData([]string{"0x00000000", "0x10000000", "0xffffffff"})
	e.ok(ns.CreateNsWithBundlesData("t/custom", &custom))
	b := bundles(e, "t/custom")
	if b.NumBundles != 2 || b.Boundaries[1] != "0x10000000" {
		t.Fatalf("custom bundles: %+v", b)
	}
	bad := utils.NewBundlesData([]string{"0x00000000", "0x90000000", "0x80000000", "0xffffffff"})
	e.status(ns.CreateNsWithBundlesData("t/bad", &bad), 400, "bundles.boundaries[2]: must be greater than the one before")
	e.status(ns.CreateNsWithNumBundles("t/bad", 1<<20), 400, "bundles.numBundles: must be between 1 and 65536")
	e.status(ns.CreateNsWithPolices("t/bad", utils.Policies{ReplicationClusters: []string{"other"}}), 403,
		"cluster other is not in the list of allowed clusters of tenant t")
	e.want("PUT", "/admin/v2/namespaces/t/bad", `{"message_ttl_in_seconds": "soon"}`, 400, "policies.message_ttl_in_seconds: want int")
	e.want("PUT", "/admin/v2/namespaces/t/bad", `{"bundles": `, 400, "policies: malformed JSON")

	ttl := 30
	e.ok(ns.CreateNsWithPolices("t/withttl", utils.Policies{MessageTTLInSeconds: &ttl}))
	if got, _ := ns.GetNamespaceMessageTTL("t/withttl"); got != 30 {
		t.Fatalf("ttl from create = %d", got)
	}
	names, err := ns.GetNamespaces("t")
	e.ok(err)
	if !slices.Equal(names, []string{"t/custom", "t/eight", "t/ns", "t/withttl"}) {
		t.Fatalf("GetNamespaces = %v", names)
	}
	_, err = ns.GetNamespaces("nobody")
	e.status(err, 404, "tenant nobody does not exist")
	_, err = ns.GetPolicies("t/nope")
	e.status(err, 404, "namespace t/nope does not exist")
}

func bundles(e *env, ns string) resources.BundlesData {
	e.t.Helper()
	code, body := e.do("GET", "/admin/v2/namespaces/"+ns+"/bundles", "")
	if code != 200 {
		e.t.Fatalf("GET bundles of %s: %d %s", ns, code, body)
	}
	var b resources.BundlesData
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		e.t.Fatal(err)
	}
	return b
}

func TestNamespaceTopics(t *testing.T) {
	e := newEnv(t).withTenant()
	ns := e.pa.Namespaces()
	e.ok(ns.CreateNamespace("t/ns"))
	topics, err := ns.GetTopics("t/ns")
	e.ok(err)
	if len(topics) != 0 {
		t.Fatalf("GetTopics = %v", topics)
	}
	e.topics.set("t/ns", "persistent://t/ns/b", "non-persistent://t/ns/n", "persistent://t/ns/a-partition-0")
	topics, err = ns.GetTopics("t/ns")
	e.ok(err)
	if !slices.Equal(topics, []string{"persistent://t/ns/a-partition-0", "persistent://t/ns/b"}) {
		t.Fatalf("GetTopics = %v", topics)
	}
	e.want("GET", "/admin/v2/namespaces/t/ns/topics?mode=ALL", "", 200, `"non-persistent://t/ns/n"`)
	e.want("GET", "/admin/v2/namespaces/t/ns/topics?mode=SOME", "", 400, "mode: unknown mode")
	_, err = ns.GetTopics("t/none")
	e.status(err, 404, "namespace t/none does not exist")
}

func TestNamespaceDelete(t *testing.T) {
	e := newEnv(t).withTenant()
	ns := e.pa.Namespaces()
	e.ok(ns.CreateNamespace("t/ns"))
	e.topics.set("t/ns", "persistent://t/ns/x")
	e.status(ns.DeleteNamespace("t/ns"), 409, "namespace t/ns is not empty: it has 1 topics")
	e.topics.set("t/ns")
	topic := resources.TopicName{Domain: "persistent", Tenant: "t", Namespace: "ns", Local: "p"}
	e.ok(e.res.CreatePartitionedTopic(e.ctx, topic, resources.PartitionedTopicMetadata{Partitions: 2}))
	e.status(ns.DeleteNamespace("t/ns"), 409, "0 topics and 1 partitioned topics")
	if p, _ := ns.GetPolicies("t/ns"); p.Deleted {
		t.Fatal("a refused delete left the namespace marked deleted")
	}
	e.ok(e.res.DeletePartitionedTopic(e.ctx, topic))
	e.want("DELETE", "/admin/v2/namespaces/t/ns?force=true", "", 405, "forced deletion of namespaces")
	e.ok(ns.DeleteNamespace("t/ns"))
	e.status(ns.DeleteNamespace("t/ns"), 404, "namespace t/ns does not exist")
	e.ok(e.pa.Tenants().Delete("t"))
}
