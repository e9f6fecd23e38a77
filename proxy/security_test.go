package proxy

import "testing"

// TestAuthTopicReadsNamesAsTheBroker: the proxy authorizes a topic against
// the namespace the broker will serve it from; a v1 name
// (property/cluster/ns/topic) is in namespace "cluster/ns", never in the
// v2 namespace property/cluster.
func TestAuthTopicReadsNamesAsTheBroker(t *testing.T) {
	for in, want := range map[string][3]string{
		"orders":                                {"public", "default", "persistent://public/default/orders"},
		"t/ns/orders-partition-3":               {"t", "ns", "persistent://t/ns/orders"},
		"non-persistent://t/ns/x":               {"t", "ns", "non-persistent://t/ns/x"},
		"persistent://sample/standalone/ns1/t":  {"sample", "standalone/ns1", "persistent://sample/standalone/ns1/t"},
		"sample/standalone/ns1/a/b-partition-0": {"sample", "standalone/ns1", "persistent://sample/standalone/ns1/a/b"},
	} {
		got, err := authTopic(in)
		if err != nil || got.Tenant != want[0] || got.Namespace != want[1] || got.Name != want[2] {
			t.Errorf("authTopic(%q) = %+v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"persistent://p//n/t", "persistent://a/b", "s3://a/b/c"} {
		if _, err := authTopic(bad); err == nil {
			t.Errorf("authTopic(%q) accepted", bad)
		}
	}
}
