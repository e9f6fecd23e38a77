package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// TestTopicProperties: pulsaradmin's topic properties, for a
// non-partitioned topic (kept in its managed ledger: they survive an
// unload) and a partitioned one (kept in its partitioned metadata): given
// at creation, merged by an update, one removed by key.
func TestTopicProperties(t *testing.T) {
	b, _ := startPolicyBroker(t, func(*resources.Policies) {})
	a, _ := policyAdmin(t, b)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		partitions int
	}{{"persistent://t/ns/props-plain", 0}, {"persistent://t/ns/props-partitioned", 3}} {
		tn := topicName(t, tc.name)
		check := func(when, want string) {
			t.Helper()
			got, err := a.Topics().GetProperties(tn)
			if err != nil || fmt.Sprint(got) != want {
				t.Fatalf("%s %s: properties %v %v, want %s", tc.name, when, got, err, want)
			}
		}
		if err := a.Topics().CreateWithProperties(tn, tc.partitions, map[string]string{"k1": "v1"}); err != nil {
			t.Fatal(err)
		}
		check("created", "map[k1:v1]")
		if err := a.Topics().UpdateProperties(tn, map[string]string{"k1": "v1b", "k2": "v2"}); err != nil {
			t.Fatal(err)
		}
		if err := a.Topics().UpdateProperties(tn, map[string]string{"k3": "v3"}); err != nil {
			t.Fatal(err)
		}
		check("updated twice", "map[k1:v1b k2:v2 k3:v3]")
		if err := a.Topics().RemoveProperty(tn, "k1"); err != nil {
			t.Fatal(err)
		}
		check("after removing k1", "map[k2:v2 k3:v3]")
		if tc.partitions == 0 {
			b.UnloadTopic(ctx, tc.name)
			check("after an unload", "map[k2:v2 k3:v3]")
		}
	}
	if _, err := a.Topics().GetProperties(topicName(t, "persistent://t/ns/never-created")); err == nil {
		t.Fatal("properties of a topic that does not exist")
	}
}
