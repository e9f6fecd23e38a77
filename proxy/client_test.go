package proxy

// The official Go client and pulsaradmin through the proxy against real
// (in-process) brokers in cluster mode, over TCP.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/magnetar-io/magnetar/broker"
)

func send(t *testing.T, p pulsar.Producer, n int, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%s-%d", prefix, i)), Key: fmt.Sprint(i % 7)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

func receive(t *testing.T, c pulsar.Consumer, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for len(got) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		m, err := c.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("receive after %d of %d: %v", len(got), n, err)
		}
		got[string(m.Payload())] = true
		_ = c.Ack(m)
	}
	return got
}

func TestClientThroughProxy(t *testing.T) {
	e := newEnv(t, 2)
	px := e.startProxy(Config{})
	client := e.client(px.url)

	for _, st := range []pulsar.SubscriptionType{pulsar.Exclusive, pulsar.Shared, pulsar.Failover, pulsar.KeyShared} {
		t.Run(fmt.Sprint("subscription-", st), func(t *testing.T) {
			topic := fmt.Sprintf("persistent://public/default/sub-%d", st)
			cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: st})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			send(t, prod, 200, "m")
			receive(t, cons, 200)
		})
	}

	t.Run("reader-and-seek", func(t *testing.T) {
		topic := "persistent://public/default/reader"
		prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		send(t, prod, 10, "r")
		rd, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		for i := 0; rd.HasNext(); i++ {
			m, err := rd.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("r-%d", i); string(m.Payload()) != want {
				t.Fatalf("reader got %q, want %q", m.Payload(), want)
			}
		}
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "seeker",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		receive(t, cons, 10)
		if err := cons.SeekByTime(time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m, err := cons.Receive(ctx)
		if err != nil || string(m.Payload()) != "r-0" {
			t.Fatalf("after seek: %v %v", m, err)
		}
	})

	t.Run("partitioned-via-admin", func(t *testing.T) {
		admin := e.admin(px.web.URL)
		tn, _ := utils.GetTopicName("persistent://public/default/parts")
		if err := admin.Topics().Create(*tn, 4); err != nil {
			t.Fatal(err)
		}
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: tn.String(), SubscriptionName: "s", Type: pulsar.Shared})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tn.String()})
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		send(t, prod, 100, "p")
		receive(t, cons, 100)
		meta, err := admin.Topics().GetMetadata(*tn)
		if err != nil || meta.Partitions != 4 {
			t.Fatalf("partitioned metadata through the proxy: %+v %v", meta, err)
		}
		// Stats of each partition: the proxy follows the 307 to its owner.
		for i := range 4 {
			pt, _ := utils.GetTopicName(fmt.Sprintf("%s-partition-%d", tn, i))
			st, err := admin.Topics().GetStats(*pt)
			if err != nil {
				t.Fatalf("stats of %s through the proxy: %v", pt, err)
			}
			if st.MsgCounterIn == 0 {
				t.Fatalf("stats of %s: nothing in", pt)
			}
		}
		ns, _ := utils.GetNamespaceName("public/default")
		topics, _, err := admin.Topics().List(*ns)
		if err != nil || len(topics) == 0 {
			t.Fatalf("list: %v %v", topics, err)
		}
	})

	t.Run("large-and-chunked", func(t *testing.T) {
		topic := "persistent://public/default/large"
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		large, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer large.Close()
		chunked, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true,
			EnableChunking: true, ChunkMaxMessageSize: 100 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer chunked.Close()
		big := bytes.Repeat([]byte("0123456789abcdef"), (4<<20)/16)
		huge := bytes.Repeat([]byte("fedcba9876543210"), (7<<20)/16)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := large.Send(ctx, &pulsar.ProducerMessage{Payload: big}); err != nil {
			t.Fatalf("4 MiB message: %v", err)
		}
		if _, err := chunked.Send(ctx, &pulsar.ProducerMessage{Payload: huge}); err != nil {
			t.Fatalf("7 MiB chunked message: %v", err)
		}
		for _, want := range [][]byte{big, huge} {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Payload(), want) {
				t.Fatalf("got %d bytes, want %d", len(m.Payload()), len(want))
			}
			_ = cons.Ack(m)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		for _, name := range []string{"pulsar_proxy_binary_bytes_in", "pulsar_proxy_binary_bytes_out",
			"pulsar_proxy_new_connections", "pulsar_proxy_lookup_requests"} {
			n, err := testutil.GatherAndCount(px.reg, name)
			if err != nil || n != 1 {
				t.Fatalf("%s: %d %v", name, n, err)
			}
		}
		if v := testutil.ToFloat64(px.p.m.bytesIn); v < 11<<20 {
			t.Fatalf("bytes in %v, want at least the 11 MiB sent", v)
		}
		if v := testutil.ToFloat64(px.p.m.lookups); v == 0 {
			t.Fatal("no lookup counted")
		}
		resp, err := px.web.Client().Get(px.web.URL + "/status.html")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status.html: %v %v", resp, err)
		}
		resp.Body.Close()
	})
	_ = strings.Contains
}

// Transactions through the proxy: the client reaches the coordinator (the
// owner of the assign partition) through it, and a transaction over topics
// on two brokers commits.
func TestTransactionsThroughProxy(t *testing.T) {
	e := newEnvWith(t, 2, broker.Config{TransactionCoordinatorEnabled: true})
	px := e.startProxy(Config{})
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: px.url, OperationTimeout: 20 * time.Second,
		EnableTransaction: true, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	tx, err := client.NewTransaction(time.Minute)
	if err != nil {
		t.Fatalf("new transaction through the proxy: %v", err)
	}
	var consumers []pulsar.Consumer
	for i := range 4 {
		topic := fmt.Sprintf("persistent://public/default/txn-proxy-%d", i)
		cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		consumers = append(consumers, cons)
		prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(topic), Transaction: tx}); err != nil {
			t.Fatalf("send in the transaction: %v", err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatalf("commit through the proxy: %v", err)
	}
	for _, cons := range consumers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after the commit: %v", err)
		}
		_ = cons.Ack(m)
	}
}
