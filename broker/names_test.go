package broker

// Names with '/', '%', dots, spaces and unicode (issue 16, defect 2): a '/'
// in a local name nested one topic's metadata inside another's, and the
// first topic lost its messages at the next load.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// restartableStorage is a metadata server and a bookie that outlive the
// brokers started over them.
type restartableStorage struct {
	meta *metadata.MemoryServer
	tr   *ledger.LocalTransport
}

func newRestartableStorage(t *testing.T) *restartableStorage {
	t.Helper()
	s := &restartableStorage{meta: metadata.NewMemoryServer(), tr: ledger.NewLocalTransport()}
	bk := ledgertest.StartBookie(t, engine.NewMem(), s.meta, s.tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(s.tr) })
	return s
}

// start serves a new broker over the storage; stop closes it (as a clean
// shutdown would) so the next one loads every topic from storage.
func (s *restartableStorage) start(t *testing.T) (url string, stop func()) {
	t.Helper()
	lc, store := ledgertest.Client(t, s.meta, s.tr)
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: store, Ledgers: lc, MaxEntriesPerLedger: 2,
		MinLedgerRolloverTime: 1, MarkDeleteRate: 20, Logger: ledgertest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, f)
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		b.Close(ctx)
	}
	return "pulsar://" + srv.Addr().String(), stop
}

// A name of four or more parts is v1 (property/cluster/namespace/local), as
// in Pulsar, and only a v1 local name can hold '/': n/x/y and n/x are the
// local names x/y and x of v1 namespace public/default/n, stored beside
// v2 topic public/default/n without nesting.
func TestTopicAndSubscriptionNamesWithSlashesSurviveRestart(t *testing.T) {
	s := newRestartableStorage(t)
	url, stop := s.start(t)
	c := newClient(t, url)
	topics := []string{"persistent://public/default/n/x/y", "persistent://public/default/n/x",
		"persistent://public/default/50% off", "persistent://public/default/n/日本/..", "persistent://public/default/n"}
	subs := []string{"x/y", "x", "..", "a%2Fb", "sp ace"}
	for i, topic := range topics {
		for _, sub := range subs {
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			if err != nil {
				t.Fatalf("subscribe %q on %s: %v", sub, topic, err)
			}
			cons.Close()
		}
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatalf("producer on %s: %v", topic, err)
		}
		for j := range 3 + i {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s#%d", topic, j)}); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
	c.Close()
	stop()

	url, stop = s.start(t)
	defer stop()
	c = newClient(t, url)
	for i, topic := range topics {
		for _, sub := range subs {
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub})
			if err != nil {
				t.Fatalf("after the restart: subscribe %q on %s: %v", sub, topic, err)
			}
			got := receive(t, cons, 3+i, true)
			for j, m := range got {
				if want := fmt.Sprintf("%s#%d", topic, j); m != want {
					t.Fatalf("after the restart, %s/%s message %d is %q, want %q", topic, sub, j, m, want)
				}
			}
			cons.Close()
		}
	}
}
