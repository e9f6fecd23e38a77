package main

// An instance of three clusters set up as Pulsar's docs set one up: one
// configuration store shared by all, each cluster's metadata store of its
// own (chroots of one ZooKeeper), each cluster joined by
// initialize-cluster-metadata alone, with its own bookie and broker
// processes; then a tenant and a namespace replicated to all three, made
// through the admin CLI, and messages produced in two clusters reaching a
// consumer in the third (issue 38).

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// instanceCluster is one cluster of the instance.
type instanceCluster struct {
	name     string
	web, bin int
	bookie   *bookieProcess
	broker   *bookieProcess
}

func (c *instanceCluster) serviceURL() string { return fmt.Sprintf("pulsar://127.0.0.1:%d", c.bin) }
func (c *instanceCluster) webURL() string     { return fmt.Sprintf("http://127.0.0.1:%d", c.web) }

// startInstanceCluster joins cluster name to the instance and starts its
// bookie and broker.
func startInstanceCluster(t *testing.T, dir, zk, name string) *instanceCluster {
	t.Helper()
	c := &instanceCluster{name: name, web: freePort(t), bin: freePort(t)}
	cluster, config := zk+"/"+name, zk+"/config"
	var out strings.Builder
	if rc := run([]string{"initialize-cluster-metadata", "--cluster", name, "--metadata-store", cluster,
		"--configuration-metadata-store", config, "--web-service-url", c.webURL(),
		"--broker-service-url", c.serviceURL()}, &out, &out); rc != 0 {
		t.Fatalf("initialize-cluster-metadata --cluster %s: %d %s", name, rc, out.String())
	}
	d := filepath.Join(dir, name)
	bkConf := filepath.Join(dir, name+"-bk_server.conf")
	writeFile(t, bkConf, "metadataServiceUri="+cluster+"\nzkTimeout=4000\n")
	c.bookie = startBookieProcess(t, "--config", bkConf, "--journal-dirs", d+"/journal", "--ledger-dirs", d+"/ledgers",
		"--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
		"--bookie-port", strconv.Itoa(freePort(t)), "--http-port", strconv.Itoa(freePort(t)), "--io-backend", "std")
	brConf := filepath.Join(dir, name+"-broker.conf")
	writeFile(t, brConf, "clusterName="+name+"\nmetadataStoreSessionTimeoutMillis=4000\n"+
		"managedLedgerDefaultEnsembleSize=1\nmanagedLedgerDefaultWriteQuorum=1\nmanagedLedgerDefaultAckQuorum=1\n")
	c.broker = startMagnetarProcess(t, "broker", nil, "--config", brConf, "--metadata-store", cluster,
		"--configuration-metadata-store", config, "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
		"--broker-port", strconv.Itoa(c.bin), "--web-port", strconv.Itoa(c.web))
	return c
}

func TestThreeClustersOneInstanceThroughTheCLI(t *testing.T) {
	skipProcessesIfShort(t)
	zk := zktest.StartForTest(t, 1)
	dir := t.TempDir()
	var clusters []*instanceCluster
	keepLogsOnFailure(t, func() map[string]string {
		logs := map[string]string{}
		for _, c := range clusters {
			logs[c.name+"-bookie"] = c.bookie.out.String()
			logs[c.name+"-broker"] = c.broker.out.String()
		}
		return logs
	})
	for _, name := range []string{"c1", "c2", "c3"} {
		clusters = append(clusters, startInstanceCluster(t, dir, zk.Connection, name))
	}
	for _, c := range clusters {
		c.bookie.waitReady(t)
		c.broker.waitReady(t)
	}
	admin := func(c *instanceCluster, args ...string) string {
		t.Helper()
		var out strings.Builder
		if rc := run(append([]string{"admin", "--admin-url", c.webURL()}, args...), &out, &out); rc != 0 {
			t.Fatalf("admin %v on %s: %d %s", args, c.name, rc, out.String())
		}
		return out.String()
	}
	// One instance: every cluster sees the three, and public/default
	// replicates to all of them, with nothing registered by hand.
	for _, c := range clusters {
		for _, name := range []string{"c1", "c2", "c3"} {
			if list := admin(c, "clusters", "list"); !strings.Contains(list, name) {
				t.Fatalf("cluster %s does not see %s: %s", c.name, name, list)
			}
		}
	}
	admin(clusters[0], "tenants", "create", "geo", "--allowed-clusters", "c1,c2,c3")
	admin(clusters[1], "namespaces", "create", "geo/orders", "--clusters", "c1,c2,c3")
	if got := admin(clusters[2], "namespaces", "get-clusters", "geo/orders"); !strings.Contains(got, "c1") ||
		!strings.Contains(got, "c2") || !strings.Contains(got, "c3") {
		t.Fatalf("geo/orders replication clusters seen from c3: %s", got)
	}

	const topic = "persistent://geo/orders/o"
	client := func(c *instanceCluster) pulsar.Client {
		cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: c.serviceURL(), Logger: plog.DefaultNopLogger(),
			OperationTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cons, err := client(clusters[1]).Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "in-c2"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := map[string]bool{}
	for _, c := range []*instanceCluster{clusters[0], clusters[2]} {
		p, err := client(c).CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatalf("producer in %s: %v", c.name, err)
		}
		for i := range 20 {
			body := fmt.Sprintf("%s-%d", c.name, i)
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(body)}); err != nil {
				t.Fatalf("send in %s: %v", c.name, err)
			}
			want[body] = true
		}
		p.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for len(want) > 0 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("consumer in c2: %v; still missing %d messages", err, len(want))
		}
		delete(want, string(m.Payload()))
		cons.Ack(m)
	}
}
