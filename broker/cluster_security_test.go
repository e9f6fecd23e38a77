package broker

// A secured cluster: brokers call each other's admin API (unloading a
// bundle another broker owns) with their own credentials
// (brokerClientAuthenticationPlugin/Parameters), which the callee's
// authorization lets in as a superuser.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/metadata"
)

func startSecuredClusterBroker(t *testing.T, meta *metadata.MemoryServer, secret []byte, creds *auth.ClientCredentials, logger *slog.Logger) *clusterBroker {
	t.Helper()
	tokens, err := auth.NewTokenProvider(auth.TokenConfig{SecretKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewSession()
	b := New(Config{ClusterName: "test", Metadata: store, StatsUpdateFrequency: 100 * time.Millisecond, Logger: logger,
		Authentication: auth.NewAuthenticator("", tokens), Authorization: auth.NewAuthorizer([]string{"super", "brokers"}, false, nil),
		BrokerClient: creds}, testLedgers(t, 50))
	srv, err := b.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(b.HTTPHandler())
	own, err := b.EnableOwnership(context.Background(), ownership.Config{Store: store,
		BrokerID: strings.TrimPrefix(web.URL, "http://"), WebServiceURL: web.URL,
		PulsarServiceURL: "pulsar://" + srv.Addr().String(), ReportInterval: 100 * time.Millisecond,
		HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: creds.RoundTripper(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	cb := &clusterBroker{b: b, srv: srv, web: web, store: store, own: own}
	t.Cleanup(cb.close)
	return cb
}

func TestSecuredClusterBrokersCallEachOtherWithTheirCredentials(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	sign := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		creds string // the brokers' token ("" none)
		want  int
	}{
		{"without broker credentials the owner refuses", "", http.StatusInternalServerError},
		{"with them the unload reaches the owner", sign("brokers"), http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds, err := auth.ParseClientCredentials("token", "token:"+tc.creds)
			if tc.creds == "" {
				creds, err = auth.ParseClientCredentials("", "")
			}
			if err != nil {
				t.Fatal(err)
			}
			meta := metadata.NewMemoryServer()
			logs := newFailureLog(t)
			// Broker b, alone at first, comes to own bundles of the
			// namespace; then broker a joins.
			b := startSecuredClusterBroker(t, meta, secret, creds, logs.logger().With("broker", 1))
			ctx := context.Background()
			for i := range 32 {
				if _, err := b.own.Lookup(ctx, "public/default", fmt.Sprintf("persistent://public/default/t%d", i), false); err != nil {
					t.Fatal(err)
				}
			}
			if len(b.own.Owned()) == 0 {
				t.Fatal("broker b owns no bundle")
			}
			a := startSecuredClusterBroker(t, meta, secret, creds, logs.logger().With("broker", 0))
			// A superuser asks broker a to unload them all: a must ask b.
			req, _ := http.NewRequest(http.MethodPut, a.web.URL+"/admin/v2/namespaces/public/default/unload", nil)
			req.Header.Set("Authorization", "Bearer "+sign("super"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("unload through the other broker: %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
