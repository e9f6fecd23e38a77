package broker

import (
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// Pulsar's topics hash is Guava's CRC32C HashCode over the sorted names
// written back to back, printed as its little-endian bytes in hex:
// CRC32C("123456789") is the standard check value 0xe3069283.
func TestTopicsHashIsPulsars(t *testing.T) {
	if got := topicsHash([]string{"123456789"}); got != "839206e3" {
		t.Fatalf("hash = %s, want 839206e3", got)
	}
	if topicsHash([]string{"1234", "56789"}) != topicsHash([]string{"123456789"}) {
		t.Fatal("names are not hashed back to back")
	}
	if got := topicsHash(nil); got != "00000000" {
		t.Fatalf("hash of nothing = %s", got)
	}
}

// readCommand reads until a command of type want arrives.
func readCommand(t *testing.T, r *rawClient, want pb.BaseCommand_Type) *pb.BaseCommand {
	t.Helper()
	for {
		cmd, err := r.read()
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		if cmd.GetType() == want {
			return cmd
		}
	}
}

// A topic-list watcher gets the matching topics, then one update per
// change: a topic created, a partitioned topic created (its partitions),
// a topic deleted; topics that do not match are not told. Closing it
// answers SUCCESS; watching again with the current hash gets no list.
func TestWatchTopicList(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	client := newClient(t, env.url)
	const ns = "persistent://public/default/"
	produce(t, client, ns+"wt-a", 1, false)
	produce(t, client, ns+"other", 1, false)

	r := dialRaw(t, env.url)
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("raw-test"), ProtocolVersion: ptr(int32(20))}})
	if cmd := readCommand(t, r, pb.BaseCommand_CONNECTED); !cmd.GetConnected().GetFeatureFlags().GetSupportsTopicWatchers() {
		t.Fatal("CONNECTED does not advertise supports_topic_watchers")
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum(), WatchTopicList: &pb.CommandWatchTopicList{
		RequestId: ptr(uint64(1)), WatcherId: ptr(uint64(7)), Namespace: ptr("public/default"),
		TopicsPattern: ptr(ns + "wt-.*")}})
	ok := readCommand(t, r, pb.BaseCommand_WATCH_TOPIC_LIST_SUCCESS).GetWatchTopicListSuccess()
	if !slices.Equal(ok.GetTopic(), []string{ns + "wt-a"}) || ok.GetTopicsHash() != topicsHash([]string{ns + "wt-a"}) {
		t.Fatalf("WATCH_TOPIC_LIST_SUCCESS = %v", ok)
	}
	expectUpdate := func(what string, added, deleted []string) {
		t.Helper()
		u := readCommand(t, r, pb.BaseCommand_WATCH_TOPIC_UPDATE).GetWatchTopicUpdate()
		if u.GetWatcherId() != 7 || !slices.Equal(u.GetNewTopics(), added) || !slices.Equal(u.GetDeletedTopics(), deleted) {
			t.Fatalf("%s: update %v, want new %v deleted %v", what, u, added, deleted)
		}
	}
	produce(t, client, ns+"not-matching", 1, false)
	produce(t, client, ns+"wt-b", 1, false)
	expectUpdate("topic created", []string{ns + "wt-b"}, nil)
	if err := env.admin.Topics().Create(topicName(t, ns+"wt-p"), 2); err != nil {
		t.Fatal(err)
	}
	expectUpdate("partitioned topic created", []string{ns + "wt-p-partition-0", ns + "wt-p-partition-1"}, nil)
	if err := env.admin.Topics().Delete(topicName(t, ns+"wt-b"), true, true); err != nil {
		t.Fatal(err)
	}
	expectUpdate("topic deleted", nil, []string{ns + "wt-b"})

	r.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST_CLOSE.Enum(), WatchTopicListClose: &pb.CommandWatchTopicListClose{
		RequestId: ptr(uint64(2)), WatcherId: ptr(uint64(7))}})
	if s := readCommand(t, r, pb.BaseCommand_SUCCESS); s.GetSuccess().GetRequestId() != 2 {
		t.Fatalf("close answered %v", s)
	}
	now := []string{ns + "wt-a", ns + "wt-p-partition-0", ns + "wt-p-partition-1"}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum(), WatchTopicList: &pb.CommandWatchTopicList{
		RequestId: ptr(uint64(3)), WatcherId: ptr(uint64(8)), Namespace: ptr("public/default"),
		TopicsPattern: ptr(ns + "wt-.*"), TopicsHash: ptr(topicsHash(now))}})
	if ok := readCommand(t, r, pb.BaseCommand_WATCH_TOPIC_LIST_SUCCESS).GetWatchTopicListSuccess(); len(ok.GetTopic()) != 0 ||
		ok.GetTopicsHash() != topicsHash(now) {
		t.Fatalf("watch with the current hash = %v", ok)
	}
	produce(t, client, ns+"wt-c", 1, false) // after the close, only watcher 8 hears of it
	if u := readCommand(t, r, pb.BaseCommand_WATCH_TOPIC_UPDATE).GetWatchTopicUpdate(); u.GetWatcherId() != 8 {
		t.Fatalf("update for watcher %d after it closed", u.GetWatcherId())
	}
}

// GET_TOPICS_OF_NAMESPACE with a pattern answers the matching topics
// (filtered), with their hash; a client that sends the same hash gets no
// list and changed=false.
func TestGetTopicsOfNamespacePattern(t *testing.T) {
	_, url := startBroker(t)
	client := newClient(t, url)
	const ns = "persistent://public/default/"
	for _, name := range []string{"gt-a", "gt-b", "other"} {
		produce(t, client, ns+name, 1, false)
	}
	r := dialRaw(t, url)
	r.connect()
	ask := func(req uint64, hash *string) *pb.CommandGetTopicsOfNamespaceResponse {
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE.Enum(), GetTopicsOfNamespace: &pb.CommandGetTopicsOfNamespace{
			RequestId: ptr(req), Namespace: ptr("public/default"), TopicsPattern: ptr(ns + "gt-.*"), TopicsHash: hash}})
		return readCommand(t, r, pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE).GetGetTopicsOfNamespaceResponse()
	}
	want := []string{ns + "gt-a", ns + "gt-b"}
	resp := ask(1, nil)
	if !slices.Equal(resp.GetTopics(), want) || !resp.GetFiltered() || !resp.GetChanged() || resp.GetTopicsHash() != topicsHash(want) {
		t.Fatalf("first answer %v", resp)
	}
	resp = ask(2, resp.TopicsHash)
	if len(resp.GetTopics()) != 0 || resp.GetChanged() || resp.GetTopicsHash() != topicsHash(want) {
		t.Fatalf("answer to a client with the current hash %v", resp)
	}
}

// The official Go client's pattern consumer still works: it asks without a
// pattern and filters itself.
func TestPatternConsumerWithoutBrokerFilter(t *testing.T) {
	_, url := startBroker(t)
	client := newClient(t, url)
	produce(t, client, "persistent://public/default/pc-a", 1, false)
	cons, err := client.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/pc-.*",
		SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if got := receive(t, cons, 1, true); got[0] != "m-00000" {
		t.Fatalf("got %q", got[0])
	}
}
