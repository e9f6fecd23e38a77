package resources

import (
	"errors"
	"testing"
)

// A topic's reference reads what TopicPoliciesShared reads, refuses a name
// that has no policies, and a cached read through it allocates nothing
// (TopicPoliciesShared builds the node's path on every call).
func TestTopicPoliciesRef(t *testing.T) {
	f := newFixture(t)
	topic := TopicName{Domain: DomainPersistent, Tenant: "t", Namespace: "ns", Local: "a b"}
	must(t, f.r.SetTopicPolicy(f.ctx, topic, "", "maxMessageSize", []byte("512")))
	ref, err := NewTopicPoliciesRef(topic)
	must(t, err)
	want, err := f.r.TopicPoliciesShared(f.ctx, topic)
	must(t, err)
	got, err := f.r.TopicPoliciesAt(f.ctx, ref)
	must(t, err)
	if v, ok := TopicPolicy[int64](got, "c1", "maxMessageSize"); !ok || v != 512 {
		t.Fatalf("through the reference: maxMessageSize %d (set: %v), want 512; TopicPoliciesShared read %+v", v, ok, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = f.r.TopicPoliciesAt(f.ctx, ref) }); allocs != 0 {
		t.Errorf("a cached read through the reference allocated %.1f times", allocs)
	}
	if _, err := NewTopicPoliciesRef(TopicName{Domain: DomainPersistent, Tenant: "t", Namespace: "n s", Local: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid namespace: got %v, want ErrInvalid", err)
	}
	if _, err := f.r.TopicPoliciesAt(f.ctx, TopicPoliciesRef{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero reference: got %v, want ErrInvalid", err)
	}
}
