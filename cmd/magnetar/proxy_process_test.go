package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
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

// Security settings the proxy cannot build are refused with a message
// naming the key, before anything listens.
func TestProxySecuritySettingsErrors(t *testing.T) {
	static := "brokerServiceURL=pulsar://127.0.0.1:1\nbrokerWebServiceURL=http://127.0.0.1:1\nservicePort=0\nwebServicePort=0\n"
	for conf, want := range map[string]string{
		static + "authenticationEnabled=true\n":                                                                       "authenticationProviders",
		static + "tlsEnabledWithBroker=true\n":                                                                        "brokerServiceURLTLS",
		static + "brokerClientAuthenticationPlugin=org.example.Kerberos\n":                                            "brokerClientAuthenticationPlugin",
		static + "brokerClientAuthenticationPlugin=token\nbrokerClientAuthenticationParameters=file:///nonexistent\n": "token file",
		static + "servicePortTls=6651\ntlsCertificateFilePath=/nonexistent\n":                                         "tlsKeyFilePath",
		static + "authorizationEnabled=true\n":                                                                        "configuration metadata store",
	} {
		path := filepath.Join(t.TempDir(), "proxy.conf")
		writeFile(t, path, conf)
		var out strings.Builder
		if rc := run([]string{"proxy", "--config", path}, &out, &out); rc == 0 || !strings.Contains(out.String(), want) {
			t.Errorf("%q: rc %d, want an error naming %q: %s", conf, rc, want, out.String())
		}
	}
}

// TestProxyProcessSecured runs `magnetar proxy` as a process configured as
// Pulsar users secure one: TLS for clients, token authentication, its own
// token towards the brokers (a proxyRoles role), TLS to the brokers; a
// standalone with authentication and authorization behind it. A granted
// client works through the proxy over TLS; others are refused.
func TestProxyProcessSecured(t *testing.T) {
	skipProcessesIfShort(t)
	dir := t.TempDir()
	writeTestPKI(t, dir)
	key, token := testTokens(t, dir)
	bp := [4]int{freePort(t), freePort(t), freePort(t), freePort(t)}
	f := securedStandalone(t, dir, key, bp, "superUserRoles=root,gateway\nproxyRoles=gateway")
	defer runStandaloneFor(t, f)()
	var out bytes.Buffer
	if rc := run([]string{"admin", "--admin-url", fmt.Sprintf("http://127.0.0.1:%d", bp[1]), "--auth-plugin", "token",
		"--auth-params", "token:" + token("root"), "namespaces", "grant-permission", "public/default", "--role", "alice",
		"--actions", "produce,consume"}, &out, &out); rc != 0 {
		t.Fatalf("grant: %s", out.String())
	}
	tokenFile := filepath.Join(dir, "gateway.token")
	writeFile(t, tokenFile, token("gateway"))
	pp := [2]int{freePort(t), freePort(t)}
	pconf := filepath.Join(t.TempDir(), "proxy.conf")
	writeFile(t, pconf, fmt.Sprintf(`brokerServiceURL=pulsar://127.0.0.1:%d
brokerWebServiceURL=http://127.0.0.1:%d
brokerServiceURLTLS=pulsar+ssl://127.0.0.1:%d
brokerWebServiceURLTLS=https://127.0.0.1:%d
bindAddress=127.0.0.1
servicePort=
webServicePort=
servicePortTls=%d
webServicePortTls=%d
tlsCertificateFilePath=%s/broker.pem
tlsKeyFilePath=%s/broker.key
tlsTrustCertsFilePath=%s/ca.pem
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken
tokenSecretKey=file://%s
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=file://%s
tlsEnabledWithBroker=true
brokerClientTrustCertsFilePath=%s/ca.pem
brokerProxyAllowedTargetPorts=*
`, bp[0], bp[1], bp[2], bp[3], pp[0], pp[1], dir, dir, dir, key, tokenFile, dir))
	p := startMagnetarProcess(t, "proxy", nil, "--config", pconf)
	p.waitReady(t)
	proxyURL := fmt.Sprintf("pulsar+ssl://127.0.0.1:%d", pp[0])
	roundTrip := func(tok, topic string) error {
		opts := pulsar.ClientOptions{URL: proxyURL, Logger: plog.DefaultNopLogger(), OperationTimeout: 5 * time.Second,
			TLSTrustCertsFilePath: dir + "/ca.pem"}
		if tok != "" {
			opts.Authentication = pulsar.NewAuthenticationToken(tok)
		}
		c, err := pulsar.NewClient(opts)
		if err != nil {
			return err
		}
		defer c.Close()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		if err != nil {
			return err
		}
		defer cons.Close()
		prod, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer prod.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("via proxy")}); err != nil {
			return err
		}
		m, err := cons.Receive(ctx)
		if err == nil && string(m.Payload()) != "via proxy" {
			err = fmt.Errorf("received %q", m.Payload())
		}
		return err
	}
	if err := roundTrip(token("alice"), "secured-proxy"); err != nil {
		t.Fatalf("alice through the proxy: %v", err)
	}
	if err := roundTrip(token("mallory"), "secured-proxy"); err == nil {
		t.Error("a role without grants produced through the proxy")
	}
	if err := roundTrip("", "secured-proxy"); err == nil {
		t.Error("a client without credentials produced through the proxy")
	}
	// The admin API through the proxy's HTTPS port, as alice (who may
	// look the topic up) and as nobody.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: caConfig(t, dir+"/ca.pem")}}
	for tok, want := range map[string]int{token("alice"): 200, "": 401} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/admin/v2/persistent/public/default/secured-proxy/stats", pp[1]), nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("stats through the proxy's HTTPS port: %d, want %d", resp.StatusCode, want)
		}
	}
}

func caConfig(t *testing.T, path string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: pool}
}
