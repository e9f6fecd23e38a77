package broker

// proxyRoles: who may name an original principal, and that both the proxy
// role and the client it speaks for are authorized (binary and HTTP).

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// connectAsProxy sends CONNECT with role's token naming original and
// returns the answer ("ok" or the error code).
func (sb *securedBroker) connectAsProxy(t *testing.T, role, original string) (*rawClient, string) {
	t.Helper()
	r := dialRaw(t, sb.bin)
	tok := sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": role})
	connect := &pb.CommandConnect{ClientVersion: ptr("proxy-test"), ProtocolVersion: ptr(int32(20)),
		AuthMethodName: ptr("token"), AuthData: []byte(tok)}
	if original != "" {
		connect.OriginalPrincipal = ptr(original)
	}
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect})
	cmd, err := r.read()
	if err != nil {
		t.Fatalf("CONNECT: %v", err)
	}
	if cmd.GetType() == pb.BaseCommand_ERROR {
		if cmd.GetError().GetError() == pb.ServerError_AuthenticationError {
			expectClosed(t, r)
		}
		return nil, cmd.GetError().GetError().String()
	}
	return r, "ok"
}

func TestProxyRolesOnConnect(t *testing.T) {
	sb := startSecuredBroker(t)
	for _, tc := range []struct {
		role, original string
		want           string
	}{
		{"proxy", "", "AuthenticationError"},            // a proxy must say whom it speaks for
		{"producer", "consumer", "AuthenticationError"}, // only proxies may speak for others
		{"super", "producer", "AuthenticationError"},    // not even a superuser
		{"proxy", "proxysuper", "AuthenticationError"},  // a client cannot be a proxy role
		{"proxy", "producer", "ok"},                     // connects; authorization decides each command
		{"proxysuper", "producer", "ok"},
	} {
		if _, got := sb.connectAsProxy(t, tc.role, tc.original); got != tc.want {
			t.Errorf("CONNECT as %s for %q: %s, want %s", tc.role, tc.original, got, tc.want)
		}
	}
}

func TestProxyRolesAuthorizeBoth(t *testing.T) {
	sb := startSecuredBroker(t)
	for _, tc := range []struct {
		role, original, op string
		want               string
	}{
		// proxy has no grant of its own: its clients get nothing through it.
		{"proxy", "producer", "PRODUCER", "AuthorizationError"},
		{"proxy", "super", "PRODUCER", "AuthorizationError"},
		// proxysuper may do anything, so the client's own rights decide.
		{"proxysuper", "producer", "PRODUCER", "ok"},
		{"proxysuper", "producer", "SUBSCRIBE", "AuthorizationError"},
		{"proxysuper", "consumer", "SUBSCRIBE", "ok"},
		{"proxysuper", "consumer", "PRODUCER", "AuthorizationError"},
		{"proxysuper", "nobody", "LOOKUP", "AuthorizationError"},
		{"proxysuper", "admin-t", "GET_TOPICS_OF_NAMESPACE", "ok"},
		{"proxysuper", "admin-o", "GET_TOPICS_OF_NAMESPACE", "AuthorizationError"},
	} {
		r, got := sb.connectAsProxy(t, tc.role, tc.original)
		if got == "ok" {
			arg := "t/ns/a"
			if tc.op == "GET_TOPICS_OF_NAMESPACE" {
				arg = "t/ns"
			}
			got = r.answer(t, tc.op, arg)
		}
		if got != tc.want {
			t.Errorf("%s as %s for %s: %s, want %s", tc.op, tc.role, tc.original, got, tc.want)
		}
	}
}

func TestProxyRolesOverHTTP(t *testing.T) {
	sb := startSecuredBroker(t)
	get := func(role, original, path string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, sb.web+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": role}))
		if original != "" {
			req.Header.Set("X-Original-Principal", original)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		role, original, path string
		want                 int
	}{
		{"producer", "super", "/admin/v2/tenants", 401},
		{"proxy", "", "/admin/v2/tenants/t", 401},
		{"proxysuper", "proxy", "/admin/v2/tenants/t", 401},
		{"proxy", "admin-t", "/admin/v2/tenants/t", 403},
		{"proxysuper", "admin-t", "/admin/v2/tenants/t", 200},
		{"proxysuper", "admin-o", "/admin/v2/tenants/t", 403},
		{"proxysuper", "producer", "/lookup/v2/topic/persistent/t/ns/a", 200},
		{"proxysuper", "nobody", "/lookup/v2/topic/persistent/t/ns/a", 403},
		{"proxysuper", "admin-t", "/admin/v2/tenants", 403},
	} {
		if got := get(tc.role, tc.original, tc.path); got != tc.want {
			t.Errorf("GET %s as %s for %q: %d, want %d", tc.path, tc.role, tc.original, got, tc.want)
		}
	}
}
