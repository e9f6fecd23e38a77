package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/magnetar-io/magnetar/broker/auth"
)

// Calls to other brokers carry the broker's own credentials when it has
// some (a caller's client certificate cannot be forwarded), else the
// caller's Authorization header.
func TestPeersCredentials(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	ctx := WithForwardedAuth(context.Background(), "Bearer caller")
	creds, err := auth.ParseClientCredentials("org.apache.pulsar.client.impl.auth.AuthenticationToken", "token:broker")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		peers *Peers
		want  string
	}{
		{&Peers{}, "Bearer caller"},
		{&Peers{Credentials: creds}, "Bearer broker"},
	} {
		if err := tc.peers.CallBroker(ctx, http.MethodGet, srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Authorization %q, want %q", got, tc.want)
		}
	}
}
