package broker

// The authorization matrix through a proxy (package proxy) in front of
// the secured broker: the proxy authenticates clients and names them to
// the broker as original_principal (X-Original-Principal over HTTP) under
// its own proxy role; every cell must answer as it does directly, over
// plaintext and TLS to the proxy, and with the proxy reaching the broker
// over plaintext and over TLS.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/proxy"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// throughProxy starts a proxy in front of sb and returns sb as seen
// through it.
func (sb *securedBroker) throughProxy(t *testing.T, tlsToBroker bool, opts ...func(*proxy.Config)) *securedBroker {
	t.Helper()
	tokens, err := auth.NewTokenProvider(auth.TokenConfig{SecretKey: sb.secret})
	if err != nil {
		t.Fatal(err)
	}
	proxyToken := sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": "proxysuper"})
	creds, err := auth.ParseClientCredentials("org.apache.pulsar.client.impl.auth.AuthenticationToken", "token:"+proxyToken)
	if err != nil {
		t.Fatal(err)
	}
	cfg := proxy.Config{BrokerServiceURL: "pulsar://" + sb.bin, BrokerWebServiceURL: sb.web,
		BrokerServiceURLTLS: "pulsar+ssl://" + sb.binTLS, BrokerWebServiceURLTLS: sb.webTLS,
		BrokerProxyAllowedTargetPorts: "*", Authentication: auth.NewAuthenticator("anon", tokens, auth.TLSProvider{}),
		BrokerClient: creds, Logger: slog.New(slog.NewTextHandler(sb.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if tlsToBroker {
		if cfg.BrokerTLS, err = (auth.ClientTLS{TrustCertsFile: sb.tlsFiles.TrustCertsFile}).Config(creds); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := proxy.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	serverTLS, err := auth.NewServerTLS(sb.tlsFiles)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := p.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	binTLS, err := p.ServeTLS("127.0.0.1:0", serverTLS.Config())
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(p.HTTPHandler())
	webTLS := httptest.NewUnstartedServer(p.HTTPHandler())
	webTLS.TLS = serverTLS.Config()
	webTLS.StartTLS()
	t.Cleanup(func() { web.Close(); webTLS.Close() })
	px := *sb
	px.bin, px.binTLS, px.web, px.webTLS = bin.String(), binTLS.String(), web.URL, webTLS.URL
	px.brokerURL, px.brokerURLTLS = "pulsar://"+sb.bin, "pulsar+ssl://"+sb.binTLS
	return &px
}

func TestSecurityMatrixThroughProxy(t *testing.T) {
	sb := startSecuredBroker(t)
	t.Run("plaintext to the broker", func(t *testing.T) { sb.throughProxy(t, false).runMatrix(t) })
	t.Run("TLS to the broker", func(t *testing.T) { sb.throughProxy(t, true).runMatrix(t) })
	// With authorizationEnabled on the proxy too, lookups are refused by
	// the proxy itself; the answers stay the same.
	t.Run("authorization at the proxy", func(t *testing.T) {
		sb.throughProxy(t, false, func(c *proxy.Config) {
			c.Authorization = auth.NewAuthorizer([]string{"super", "proxysuper"}, false, sb.res)
		}).runMatrix(t)
		if !strings.Contains(sb.logs.String(), "proxy: lookup not authorized") {
			t.Error("the proxy refused no lookup itself")
		}
	})
}

// A client that fails authentication at the proxy never makes it dial a
// broker: the broker sees no connection at all.
func TestProxyRefusesUnauthenticatedBeforeDialing(t *testing.T) {
	sb := startSecuredBroker(t)
	px := sb.throughProxy(t, false)
	ids := sb.identities(t)
	before := sb.openConns()
	for _, col := range []string{"expired", "algnone", "otherkey", "noclaim"} {
		r := dialRaw(t, px.bin)
		r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
			ClientVersion: ptr("bad"), ProtocolVersion: ptr(int32(20)), ProxyToBrokerUrl: ptr(px.brokerURL),
			AuthMethodName: ptr("token"), AuthData: []byte(ids[col].data)}})
		awaitError(t, r, pb.ServerError_AuthenticationError)
		expectClosed(t, r)
	}
	if after := sb.openConns(); after != before {
		t.Errorf("the broker saw %d connections from refused clients", after-before)
	}
}

func (sb *securedBroker) openConns() int {
	sb.b.mu.Lock()
	defer sb.b.mu.Unlock()
	return len(sb.b.conns)
}

// The official Go client through the proxy over TLS with a token: the
// lookup, the proxied connection and the data path all work, with the
// proxy reaching the broker over TLS too.
func TestGoClientThroughSecuredProxy(t *testing.T) {
	sb := startSecuredBroker(t)
	px := sb.throughProxy(t, true)
	tok := sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": "admin-t"})
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar+ssl://" + px.binTLS, Logger: log.DefaultNopLogger(),
		TLSTrustCertsFilePath: sb.tlsFiles.TrustCertsFile, Authentication: pulsar.NewAuthenticationToken(tok)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	topic := "persistent://t/ns/through-proxy"
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 200
	for i := range n {
		prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("send: %v", err)
			}
		})
	}
	if err := prod.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	receiveNumbered(ctx, t, cons, n)
	// Someone with no grant gets nothing through the proxy.
	nobody, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar+ssl://" + px.binTLS, Logger: log.DefaultNopLogger(),
		TLSTrustCertsFilePath: sb.tlsFiles.TrustCertsFile, OperationTimeout: 5 * time.Second,
		Authentication: pulsar.NewAuthenticationToken(sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": "nobody"}))})
	if err != nil {
		t.Fatal(err)
	}
	defer nobody.Close()
	if _, err := nobody.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		t.Error("a role with no grant created a producer through the proxy")
	}
}
