package broker

// Authentication refresh: expired credentials are challenged with
// AUTH_CHALLENGE; the client's AUTH_RESPONSE renews them or the connection
// closes (conn_auth.go).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// A client has until the next check to answer a challenge (as in
// Pulsar), so the interval must leave a client of make test's loaded,
// race-detected run room to answer: at 100 ms a Go client's answer came
// late and its connections were closed (CI of 4 Dec).
const refreshCheck = 400 * time.Millisecond

func startRefreshingBroker(t *testing.T) *securedBroker {
	return startSecuredBroker(t, func(c *Config) { c.AuthenticationRefreshCheck = refreshCheck })
}

// shortLived is the life of the tokens these tests see expire: long
// enough that a CONNECT under make test's load is answered before it ends.
const shortLived = 2 * time.Second

// expiringToken is a token for sub valid for at least d: JWT's exp is in
// whole seconds, so it is rounded up (rounded down, a token of one second
// made at x.95 s expired 50 ms later and its CONNECT was refused).
func (sb *securedBroker) expiringToken(t *testing.T, sub string, d time.Duration) string {
	exp := time.Now().Add(d + time.Second - time.Nanosecond).Unix()
	return sb.token(t, jwt.SigningMethodHS256, sb.secret, jwt.MapClaims{"sub": sub, "exp": exp})
}

// connectWithToken connects a raw client with tok, saying whether it
// supports auth refresh.
func (sb *securedBroker) connectWithToken(t *testing.T, tok string, refresh bool) *rawClient {
	t.Helper()
	r := dialRaw(t, sb.bin)
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("refresh-test"), ProtocolVersion: ptr(int32(20)), AuthMethodName: ptr("token"),
		AuthData: []byte(tok), FeatureFlags: &pb.FeatureFlags{SupportsAuthRefresh: ptr(refresh)}}})
	cmd, err := r.read()
	if err != nil || cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("CONNECT answered %v %v", cmd.GetType(), err)
	}
	if !cmd.GetConnected().GetFeatureFlags().GetSupportsAuthRefresh() {
		t.Error("CONNECTED does not offer auth refresh")
	}
	return r
}

// awaitChallenge reads until AUTH_CHALLENGE (PINGs skipped).
func awaitChallenge(t *testing.T, r *rawClient) *pb.CommandAuthChallenge {
	t.Helper()
	for {
		cmd, err := r.read()
		if err != nil {
			t.Fatalf("no AUTH_CHALLENGE: %v", err)
		}
		if cmd.GetType() == pb.BaseCommand_AUTH_CHALLENGE {
			return cmd.GetAuthChallenge()
		}
	}
}

func respond(r *rawClient, tok string) {
	r.send(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: &pb.CommandAuthResponse{
		Response: &pb.AuthData{AuthMethodName: ptr("token"), AuthData: []byte(tok)}}})
}

func TestAuthRefreshRenewsExpiredToken(t *testing.T) {
	sb := startRefreshingBroker(t)
	r := sb.connectWithToken(t, sb.expiringToken(t, "producer", shortLived), true)
	c := awaitChallenge(t, r)
	if c.GetChallenge().GetAuthMethodName() != "token" || string(c.GetChallenge().GetAuthData()) != "refresh" {
		t.Errorf("challenge %v, want method token and data refresh", c.GetChallenge())
	}
	respond(r, sb.expiringToken(t, "producer", time.Hour))
	time.Sleep(5 * refreshCheck) // several checks: none may close the connection
	if got := r.answer(t, "PRODUCER", "t/ns/refresh"); got != "ok" {
		t.Fatalf("PRODUCER after a refresh: %s", got)
	}
}

func TestAuthRefreshClosesConnection(t *testing.T) {
	sb := startRefreshingBroker(t)
	t.Run("no answer", func(t *testing.T) {
		r := sb.connectWithToken(t, sb.expiringToken(t, "producer", shortLived), true)
		awaitChallenge(t, r)
		expectClosed(t, r)
	})
	t.Run("another role", func(t *testing.T) {
		r := sb.connectWithToken(t, sb.expiringToken(t, "producer", shortLived), true)
		awaitChallenge(t, r)
		respond(r, sb.expiringToken(t, "super", time.Hour))
		awaitError(t, r, pb.ServerError_AuthenticationError)
		expectClosed(t, r)
	})
	t.Run("an expired token", func(t *testing.T) {
		r := sb.connectWithToken(t, sb.expiringToken(t, "producer", shortLived), true)
		awaitChallenge(t, r)
		respond(r, sb.expiringToken(t, "producer", -time.Minute))
		awaitError(t, r, pb.ServerError_AuthenticationError)
		expectClosed(t, r)
	})
	t.Run("client without refresh", func(t *testing.T) {
		r := sb.connectWithToken(t, sb.expiringToken(t, "producer", shortLived), false)
		for {
			cmd, err := r.read()
			if err != nil {
				break // closed, as expected
			}
			if cmd.GetType() == pb.BaseCommand_AUTH_CHALLENGE {
				t.Fatal("a client that cannot refresh was challenged")
			}
		}
	})
	t.Run("unsolicited answer", func(t *testing.T) {
		r := sb.connectWithToken(t, sb.expiringToken(t, "producer", time.Hour), true)
		respond(r, sb.expiringToken(t, "producer", time.Hour))
		awaitError(t, r, pb.ServerError_NotAllowedError)
	})
}

func awaitError(t *testing.T, r *rawClient, code pb.ServerError) {
	t.Helper()
	for {
		cmd, err := r.read()
		if err != nil {
			t.Fatalf("no ERROR %v: %v", code, err)
		}
		if cmd.GetType() == pb.BaseCommand_ERROR {
			if cmd.GetError().GetError() != code {
				t.Fatalf("ERROR %v %q, want %v", cmd.GetError().GetError(), cmd.GetError().GetMessage(), code)
			}
			return
		}
	}
}

// The official Go client answers the challenge with a fresh token from its
// supplier: a producer and a consumer keep working across several expiries
// with nothing lost.
func TestAuthRefreshWithGoClient(t *testing.T) {
	sb := startRefreshingBroker(t)
	supplier := func(sub string) func() (string, error) {
		return func() (string, error) { return sb.expiringToken(t, sub, 2*time.Second), nil }
	}
	newClient := func(sub string) pulsar.Client {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + sb.bin, Logger: log.DefaultNopLogger(),
			Authentication: pulsar.NewAuthenticationTokenFromSupplier(supplier(sub))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	topic := "persistent://t/ns/refresh-go"
	cons, err := newClient("consumer").Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := newClient("producer").CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 60 // over 6 s: three token lifetimes
	for i := range n {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	receiveNumbered(ctx, t, cons, n)
	if logs := sb.logs.String(); strings.Contains(logs, "connection closed: the credentials expired") ||
		strings.Contains(logs, "authentication refresh failed") {
		t.Errorf("a connection was closed for its credentials:\n%s", logs)
	}
}

// receiveNumbered receives and acknowledges the messages "0".."n-1", in
// order.
func receiveNumbered(ctx context.Context, t *testing.T, cons pulsar.Consumer, n int) {
	t.Helper()
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, m.Payload())
		}
		_ = cons.Ack(m)
	}
}
