package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// dynBroker is one broker of a test cluster sharing a metadata server.
type dynBroker struct {
	b     *Broker
	url   string
	web   string
	admin pulsaradmin.Client
}

func startDynBroker(t *testing.T, srv *metadata.MemoryServer) dynBroker {
	t.Helper()
	b := New(Config{ClusterName: "test", Metadata: srv.NewSession(), DispatcherMaxReadBatchSize: 100,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	url := serveTestBroker(t, b)
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(web.Close)
	admin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: web.URL})
	if err != nil {
		t.Fatal(err)
	}
	return dynBroker{b: b, url: url, web: web.URL, admin: admin}
}

// TestDynamicConfiguration: an override set through one broker reaches
// every broker sharing the metadata store and takes effect there; bad
// keys and values are refused; deleting it restores the started value.
func TestDynamicConfiguration(t *testing.T) {
	srv := metadata.NewMemoryServer()
	a, other := startDynBroker(t, srv), startDynBroker(t, srv)
	brokers := a.admin.Brokers()
	names, err := brokers.GetDynamicConfigurationNames()
	if err != nil || !slices.Contains(names, "dispatcherMaxReadBatchSize") || !slices.Contains(names, "ttlDurationDefaultInSeconds") {
		t.Fatalf("dynamic keys %v, %v", names, err)
	}
	expectStatus(t, "not dynamic", brokers.UpdateDynamicConfiguration("clusterName", "x"), http.StatusPreconditionFailed)
	expectStatus(t, "invalid value", brokers.UpdateDynamicConfiguration("dispatcherMaxReadBatchSize", "0"), http.StatusPreconditionFailed)
	expectStatus(t, "invalid policy", brokers.UpdateDynamicConfiguration("backlogQuotaDefaultRetentionPolicy", "drop"), http.StatusPreconditionFailed)

	if err := brokers.UpdateDynamicConfiguration("dispatcherMaxReadBatchSize", "7"); err != nil {
		t.Fatal(err)
	}
	if err := brokers.UpdateDynamicConfiguration("ttlDurationDefaultInSeconds", "1"); err != nil {
		t.Fatal(err)
	}
	// A boolean takes any value, stored as given, as Pulsar reads one
	// (Boolean.valueOf: "true" is true, anything else false);
	// pulsaradmin's own test sets a JSON object here and reads it back.
	const odd = `{"key/123":"https://example.com/"}`
	u, err := url.Parse(a.web)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/admin/v2/brokers/configuration/allowAutoSubscriptionCreation/" + odd
	u.RawPath = "/admin/v2/brokers/configuration/allowAutoSubscriptionCreation/" + url.QueryEscape(odd)
	resp, err := http.Post(u.String(), "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusOK { // as Pulsar answers it
		t.Fatalf("setting a boolean to %s: %v %v", odd, resp, err)
	}
	resp.Body.Close()
	if values, err := brokers.GetAllDynamicConfigurations(); err != nil || values["dispatcherMaxReadBatchSize"] != "7" ||
		values["allowAutoSubscriptionCreation"] != odd || len(values) != 3 {
		t.Fatalf("overrides %v, %v", values, err)
	}
	if err := brokers.DeleteDynamicConfiguration("allowAutoSubscriptionCreation"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other broker applies the override", func() error {
		rt, err := other.admin.Brokers().GetRuntimeConfigurations()
		if err != nil {
			return err
		}
		if rt["dispatcherMaxReadBatchSize"] != "7" || rt["ttlDurationDefaultInSeconds"] != "1" || rt["clusterName"] != "test" {
			return fmt.Errorf("runtime configuration %v", rt)
		}
		return nil
	})

	// The TTL override expires messages on the other broker, which was
	// started without one.
	c := newClient(t, other.url)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "dyn-ttl", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
	produce(t, c, "dyn-ttl", 5, false)
	other.b.expireByPolicy(context.Background(), time.Now().Add(2*time.Second))
	tp, err := other.b.getTopic(context.Background(), mustTopic(t, "dyn-ttl"))
	if err != nil {
		t.Fatal(err)
	}
	if backlog := tp.durableSubs()[0].cursor.Backlog(); backlog != 0 {
		t.Fatalf("backlog %d after expiry with the dynamic TTL", backlog)
	}

	if err := brokers.DeleteDynamicConfiguration("dispatcherMaxReadBatchSize"); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "delete again", brokers.DeleteDynamicConfiguration("dispatcherMaxReadBatchSize"), http.StatusNotFound)
	eventually(t, "the started value comes back", func() error {
		if got := other.b.settings().dispatcherBatch; got != 100 {
			return fmt.Errorf("dispatcherMaxReadBatchSize %d", got)
		}
		return nil
	})
	if _, err := brokers.GetInternalConfigurationData(); err != nil {
		t.Fatal(err)
	}
}

// TestDynamicConfigurationNeedsMetadata: without a metadata store the
// overrides cannot be kept, which the endpoints say (412).
func TestDynamicConfigurationNeedsMetadata(t *testing.T) {
	b := New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		managedledger.NewMemoryFactory(managedledger.MemoryOptions{}))
	t.Cleanup(func() { b.Close(context.Background()) })
	web := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(web.Close)
	admin, err := pulsaradmin.NewClient(&config.Config{WebServiceURL: web.URL})
	if err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "update without a store", admin.Brokers().UpdateDynamicConfiguration("dispatcherMaxReadBatchSize", "5"),
		http.StatusPreconditionFailed)
}

// TestBrokerStatsTopicsAndMetrics: broker-stats topics nests a loaded
// topic under its namespace and bundle, and metrics sums it into its
// namespace and the broker's totals.
func TestBrokerStatsTopicsAndMetrics(t *testing.T) {
	env := startAdminBroker(t, managedledger.NewMemoryFactory(managedledger.MemoryOptions{}), false)
	c := newClient(t, env.url)
	produce(t, c, "persistent://public/default/bstats", 3, false)
	raw, err := env.admin.BrokerStats().GetTopics()
	if err != nil {
		t.Fatal(err)
	}
	var topics map[string]map[string]map[string]map[string]struct {
		MsgInCounter int64 `json:"msgInCounter"`
	}
	if err := json.Unmarshal([]byte(raw), &topics); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if st, ok := topics["public/default"]["0x00000000_0xffffffff"]["persistent"]["persistent://public/default/bstats"]; !ok || st.MsgInCounter != 3 {
		t.Fatalf("broker-stats topics: %s", raw)
	}
	metrics, err := env.admin.BrokerStats().GetMetrics()
	if err != nil || len(metrics) != 2 || metrics[1].Dimensions["namespace"] != "public/default" ||
		metrics[1].Metrics["brk_no_of_topics"] != float64(1) || metrics[0].Metrics["brk_no_of_producers"] == nil {
		t.Fatalf("broker-stats metrics %+v, %v", metrics, err)
	}
	if beans, err := env.admin.BrokerStats().GetMBeans(); err != nil || len(beans) != 0 {
		t.Fatalf("mbeans %v, %v", beans, err)
	}
}
