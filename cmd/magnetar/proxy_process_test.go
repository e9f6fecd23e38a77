package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// TestProxyProcess runs `magnetar proxy` as a process with a proxy.conf
// naming a standalone's URLs statically, and the official client through
// it; the proxy's web port serves /metrics, /status.html and forwards the
// admin API.
func TestProxyProcess(t *testing.T) {
	skipProcessesIfShort(t)
	sf := standaloneFlags{dataDir: t.TempDir(), listenFlags: listenFlags{bindAddr: "127.0.0.1", advertised: "127.0.0.1",
		brokerPort: freePort(t), webPort: freePort(t), cluster: "standalone"}}
	defer runStandaloneFor(t, sf)()
	port, web := freePort(t), freePort(t)
	conf := filepath.Join(t.TempDir(), "proxy.conf")
	writeFile(t, conf, strings.Join([]string{
		fmt.Sprintf("brokerServiceURL=pulsar://127.0.0.1:%d", sf.brokerPort),
		fmt.Sprintf("brokerWebServiceURL=http://127.0.0.1:%d", sf.webPort),
		fmt.Sprintf("servicePort=%d", port), fmt.Sprintf("webServicePort=%d", web),
		"bindAddress=127.0.0.1", "brokerProxyAllowedTargetPorts=*", "maxConcurrentInboundConnections=100", ""}, "\n"))
	p := startMagnetarProcess(t, "proxy", nil, "--config", conf)
	p.waitReady(t)
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: fmt.Sprintf("pulsar://127.0.0.1:%d", port),
		Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: "through-proxy", SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "through-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "hello" {
		t.Fatalf("received %v %v", m, err)
	}
	for path, want := range map[string]string{"/metrics": "pulsar_proxy_active_connections", "/status.html": "OK",
		"/admin/v2/persistent/public/default/through-proxy/stats": "msgInCounter", "/debug/pprof/": "goroutine"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", web, path))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
	}
}

func TestProxyRefusesSecuritySettingsItCannotHonour(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "proxy.conf")
	writeFile(t, conf, "metadataStoreUrl=zk:127.0.0.1:1\nauthenticationEnabled=true\n")
	var out strings.Builder
	if rc := run([]string{"proxy", "--config", conf}, &out, &out); rc != 2 || !strings.Contains(out.String(), "authentication") {
		t.Fatalf("rc %d: %s", rc, out.String())
	}
}
