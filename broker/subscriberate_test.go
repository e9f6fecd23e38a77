package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// TestSubscribeRate: with the topic's subscribeRate, one consumer (its
// address and name) subscribes at most that many times per period; the
// next SUBSCRIBE gets NotAllowedError in Pulsar's words; another consumer
// name has its own bucket; without the policy there is no limit.
func TestSubscribeRate(t *testing.T) {
	b, url := startPolicyBroker(t, func(*resources.Policies) {})
	const topic = "persistent://t/ns/subscribe-rate"
	r := dialRaw(t, url)
	r.connect()
	next := uint64(0)
	subscribe := func(name string) *pb.BaseCommand {
		t.Helper()
		next++
		ans := r.request(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: ptr(topic), Subscription: ptr("s"), SubType: pb.CommandSubscribe_Shared.Enum(),
			ConsumerId: ptr(next), RequestId: ptr(next), ConsumerName: ptr(name)}})
		if ans.GetType() == pb.BaseCommand_SUCCESS {
			next++
			r.request(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
				ConsumerId: ptr(next - 1), RequestId: ptr(next)}})
		}
		return ans
	}
	if ans := subscribe("warm-up"); ans.GetType() != pb.BaseCommand_SUCCESS { // loads the topic
		t.Fatalf("first subscribe: %v", ans)
	}
	setRatePolicy(t, b, topic, "subscribeRate", json.RawMessage(`{"subscribeThrottlingRatePerConsumer":2,"ratePeriodInSecond":60}`))
	for i := range 2 {
		if ans := subscribe("c"); ans.GetType() != pb.BaseCommand_SUCCESS {
			t.Fatalf("subscribe %d within the rate: %v", i+1, ans)
		}
	}
	ans := subscribe("c")
	if ans.GetError().GetError() != pb.ServerError_NotAllowedError ||
		!strings.Contains(ans.GetError().GetMessage(), "Subscribe limited by subscribe rate limit per consumer") {
		t.Fatalf("a third subscribe in the period: %v", ans)
	}
	if ans := subscribe("other"); ans.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("another consumer: %v", ans)
	}
	setRatePolicy(t, b, topic, "subscribeRate", nil)
	if ans := subscribe("c"); ans.GetType() != pb.BaseCommand_SUCCESS {
		t.Fatalf("after the policy was removed: %v", ans)
	}
}
