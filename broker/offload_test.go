package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/managedledger/offload"
	"github.com/magnetar-io/magnetar/metadata"
)

// startOffloadBroker is a policy broker over an in-process bookie with a
// filesystem offloader under root (tiered storage needs ledgers, so not
// testLedgers' in-memory storage).
func startOffloadBroker(t *testing.T, root string, cfg Config) (*Broker, string) {
	t.Helper()
	meta, tr := metadata.NewMemoryServer(), ledger.NewLocalTransport()
	bk := ledgertest.StartBookie(t, engine.NewMem(), meta, tr, "b", ledgertest.MemoryStorage)
	t.Cleanup(func() { bk.Stop(tr) })
	lc, mlStore := ledgertest.Client(t, meta, tr)
	f, err := managedledger.NewBKFactory(managedledger.Config{Store: mlStore, Ledgers: lc, MaxEntriesPerLedger: 10,
		MinLedgerRolloverTime: 1, MarkDeleteRate: 20, Logger: ledgertest.Quiet(),
		Offload: &managedledger.OffloadConfig{Driver: offload.DriverFilesystem, Config: offload.Config{Root: root}}})
	if err != nil {
		t.Fatal(err)
	}
	return startPolicyBrokerOn(t, func(*resources.Policies) {}, f, cfg)
}

// TestOffloadThroughAdmin: pulsar-admin topics offload copies the closed
// ledgers before a message to the filesystem offloader, its status says
// SUCCESS with the first message left on the bookies, internal stats mark
// the ledgers offloaded, and a consumer reads everything (the offloaded
// part from the copies).
func TestOffloadThroughAdmin(t *testing.T) {
	root := t.TempDir()
	b, url := startOffloadBroker(t, root, Config{Offload: managedledger.OffloadPolicy{Driver: offload.DriverFilesystem,
		ThresholdBytes: -1, ThresholdAge: -1, DeletionLag: -1}})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/offloaded"
	tn := topicName(t, topic)
	cons := subscribeEarliest(t, c, topic)
	ids := produce(t, c, topic, 35, false)
	last := ids[len(ids)-1]
	if st, err := a.Topics().OffloadStatus(tn); err != nil || st.Status != utils.NOTRUN {
		t.Fatalf("before an offload: %+v %v", st, err)
	}
	err := a.Topics().Offload(tn, utils.MessageID{LedgerID: last.LedgerID(), EntryID: last.EntryID(), PartitionIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	var st utils.OffloadProcessStatus
	eventually(t, "offload finished", func() error {
		if st, err = a.Topics().OffloadStatus(tn); err != nil || st.Status != utils.SUCCESS {
			if st.Status == utils.ERROR {
				t.Fatalf("offload failed: %s", st.LastError)
			}
			return fmt.Errorf("status %+v %v", st, err)
		}
		return nil
	})
	if st.FirstUnOffloadedMessage.LedgerID != last.LedgerID() || st.FirstUnOffloadedMessage.EntryID != 0 {
		t.Fatalf("first message not offloaded %+v, want the first of ledger %d", st.FirstUnOffloadedMessage, last.LedgerID())
	}
	internal, err := a.Topics().GetInternalStats(tn)
	if err != nil {
		t.Fatal(err)
	}
	// Every ledger before the last message's is offloaded; the ledgers
	// from it on are not (one may have rolled over meanwhile: its
	// rollover is asynchronous, and under load it landed after the offload
	// in CI, 4 Dec).
	offloaded, before := 0, 0
	for _, l := range internal.Ledgers {
		if l.LedgerID < last.LedgerID() {
			before++
		}
		if l.Offloaded {
			offloaded++
		}
	}
	copies, _ := filepath.Glob(filepath.Join(root, "t/ns/persistent/offloaded", "*.ledger"))
	if n := before; n < 1 || offloaded != n || len(copies) != n {
		t.Fatalf("%d ledgers offloaded in internal stats, %d copies, want every closed one: %+v", offloaded, len(copies), internal.Ledgers)
	}
	var offloadedBytes int64
	for _, l := range internal.Ledgers {
		if l.Offloaded {
			offloadedBytes += l.Size
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(b))
	want := fmt.Sprintf(`
# HELP pulsar_storage_offloaded_size Bytes of the topic's ledgers copied to tiered storage (read from there).
# TYPE pulsar_storage_offloaded_size gauge
pulsar_storage_offloaded_size{cluster="test",namespace="t/ns",topic="%s"} %d
`, topic, offloadedBytes)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pulsar_storage_offloaded_size"); err != nil {
		t.Fatal(err)
	}
	// Unload and consume from a fresh load: the offloaded part is read
	// from the copies. The consumer that held the subscription leaves
	// first: messages it had prefetched before the unload would come again
	// after its reconnection (unacknowledged, so redelivered: Pulsar's
	// at-least-once), and the order checked here is the fresh load's.
	cons.Close()
	b.UnloadTopic(context.Background(), topic)
	expectOrdered(t, receive(t, subscribeEarliest(t, c, topic), 35, true), 35)
}

// TestOffloadPolicyOfUnavailableDriver: a topic whose offloadPolicies name
// a driver this build does not have fails its offload with an error
// naming the driver; a driver Pulsar does not know is refused when set.
func TestOffloadPolicyOfUnavailableDriver(t *testing.T) {
	b, url := startOffloadBroker(t, t.TempDir(), Config{})
	a, _ := policyAdmin(t, b)
	c := newClient(t, url)
	topic := "persistent://t/ns/s3-offload"
	tn := topicName(t, topic)
	subscribeEarliest(t, c, topic) // holds the ledgers: nothing is trimmed
	produce(t, c, topic, 25, false)
	if err := a.Topics().SetOffloadPolicies(tn, utils.OffloadPolicies{ManagedLedgerOffloadDriver: "aws-s3",
		S3ManagedLedgerOffloadBucket: "b"}); err != nil {
		t.Fatal(err)
	}
	err := a.Topics().SetOffloadPolicies(tn, utils.OffloadPolicies{ManagedLedgerOffloadDriver: "floppy"})
	if err == nil || !strings.Contains(err.Error(), "floppy") {
		t.Fatalf("driver floppy: %v, want refused naming it", err)
	}
	eventually(t, "offload policy in force", func() error {
		if p, err := a.Topics().GetOffloadPolicies(tn); err != nil || p == nil || p.ManagedLedgerOffloadDriver != "aws-s3" {
			return fmt.Errorf("offload policies %+v %v", p, err)
		}
		return nil
	})
	if err := a.Topics().Offload(tn, utils.MessageID{LedgerID: 1 << 40, PartitionIndex: -1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "offload failed", func() error {
		st, err := a.Topics().OffloadStatus(tn)
		if err != nil || st.Status != utils.ERROR {
			return fmt.Errorf("status %+v %v", st, err)
		}
		if !strings.Contains(st.LastError, "aws-s3") {
			t.Fatalf("offload error %q does not name the driver", st.LastError)
		}
		return nil
	})
}

// subscribeEarliest subscribes "s" at the earliest message, closed when
// the test ends.
func subscribeEarliest(t *testing.T, c pulsar.Client, topic string) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	return cons
}
