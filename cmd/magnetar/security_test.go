package main

import (
	"github.com/magnetar-io/magnetar/internal/tlstest"

	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// writeTestPKI writes a CA and a server certificate for 127.0.0.1 into dir
// (ca.pem, broker.pem, broker.key).
func writeTestPKI(t *testing.T, dir string) {
	t.Helper()
	ca := tlstest.NewCA(t, "test CA")
	certPEM, keyPEM := ca.Issue(t, "broker", true)
	tlstest.Write(t, filepath.Join(dir, "ca.pem"), ca.PEM)
	tlstest.Write(t, filepath.Join(dir, "broker.pem"), certPEM)
	tlstest.Write(t, filepath.Join(dir, "broker.key"), keyPEM)
}

// securedStandalone is a standalone's flags with the TLS ports (ports:
// broker, web, broker TLS, web TLS), the certificates of writeTestPKI in
// dir, token authentication under key and authorization on; extra lines
// add keys (providers, superusers, proxy roles).
func securedStandalone(t *testing.T, dir, key string, ports [4]int, extra string) standaloneFlags {
	t.Helper()
	conf := writeConf(t, fmt.Sprintf(`bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=%d
webServicePort=%d
brokerServicePortTls=%d
webServicePortTls=%d
tlsCertificateFilePath=%s/broker.pem
tlsKeyFilePath=%s/broker.key
tlsTrustCertsFilePath=%s/ca.pem
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken
tokenSecretKey=file://%s
authorizationEnabled=true
%s
`, ports[0], ports[1], ports[2], ports[3], dir, dir, dir, key, extra))
	f, err := parseStandaloneFlags([]string{"--config", conf, "--data-dir", t.TempDir(), "--storage", "memory"}, io.Discard,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// testTokens makes a secret key in dir with magnetar tokens and returns
// its path and a function issuing tokens (valid for an hour) under it.
func testTokens(t *testing.T, dir string) (string, func(sub string) string) {
	t.Helper()
	run1 := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return out.String() + errOut.String(), code
	}
	key := filepath.Join(dir, "secret.key")
	if out, code := run1("tokens", "create-secret-key", "--output", key); code != 0 {
		t.Fatalf("create-secret-key: %s", out)
	}
	return key, func(sub string) string {
		out, code := run1("tokens", "create", "--secret-key", "file://"+key, "--subject", sub, "--expiry-time", "1h")
		if code != 0 {
			t.Fatalf("tokens create: %s", out)
		}
		return strings.TrimSpace(out)
	}
}

// A standalone configured with Pulsar's security keys: TLS ports next to
// the plaintext ones, token authentication and authorization; tokens from
// magnetar tokens; magnetar admin over https with a token and the CA.
func TestStandaloneSecurity(t *testing.T) {
	dir := t.TempDir()
	writeTestPKI(t, dir)
	run1 := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return out.String() + errOut.String(), code
	}
	key, token := testTokens(t, dir)
	superToken, userToken := token("root"), token("alice")
	if out, code := run1("tokens", "validate", "-i", superToken, "--secret-key", "file://"+key); code != 0 || !strings.Contains(out, `"sub":"root"`) {
		t.Fatalf("tokens validate: %d %s", code, out)
	}

	ports := [4]int{freePort(t), freePort(t), freePort(t), freePort(t)}
	f := securedStandalone(t, dir, key, ports, `authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken,org.apache.pulsar.broker.authentication.AuthenticationProviderTls
superUserRoles=root`)
	stop := runStandaloneFor(t, f)
	defer stop()

	webTLS := fmt.Sprintf("https://127.0.0.1:%d", ports[3])
	admin := func(args ...string) (string, int) {
		return run1(append([]string{"admin", "--admin-url", webTLS, "--tls-trust-certs-file-path", dir + "/ca.pem"}, args...)...)
	}
	if out, code := admin("tenants", "list"); code != 1 || !strings.Contains(out, "401") {
		t.Errorf("admin without credentials: %d %s", code, out)
	}
	if out, code := admin("--auth-plugin", "token", "--auth-params", "token:"+userToken, "tenants", "list"); code != 1 || !strings.Contains(out, "403") {
		t.Errorf("admin as a user: %d %s", code, out)
	}
	if out, code := admin("--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params", "token:"+superToken,
		"namespaces", "grant-permission", "public/default", "--role", "alice", "--actions", "produce"); code != 0 {
		t.Fatalf("grant as superuser: %d %s", code, out)
	}

	if out, code := admin("--auth-plugin", "token", "--auth-params", "token:"+superToken, "clusters", "get", "standalone"); code != 0 ||
		!strings.Contains(out, fmt.Sprintf("pulsar+ssl://127.0.0.1:%d", ports[2])) || !strings.Contains(out, webTLS) {
		t.Errorf("the cluster's TLS URLs: %d %s", code, out)
	}

	produce := func(url string, opts pulsar.ClientOptions, topic string) error {
		opts.URL, opts.Logger, opts.OperationTimeout = url, plog.DefaultNopLogger(), 5*time.Second
		c, err := pulsar.NewClient(opts)
		if err != nil {
			return err
		}
		defer c.Close()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		_, err = p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")})
		return err
	}
	tlsURL := fmt.Sprintf("pulsar+ssl://127.0.0.1:%d", ports[2])
	plainURL := fmt.Sprintf("pulsar://127.0.0.1:%d", ports[0])
	trust := pulsar.ClientOptions{TLSTrustCertsFilePath: dir + "/ca.pem"}
	withToken := func(o pulsar.ClientOptions, tok string) pulsar.ClientOptions {
		o.Authentication = pulsar.NewAuthenticationToken(tok)
		return o
	}
	if err := produce(tlsURL, withToken(trust, userToken), "granted"); err != nil {
		t.Errorf("alice over TLS: %v", err)
	}
	if err := produce(plainURL, withToken(pulsar.ClientOptions{}, userToken), "granted"); err != nil {
		t.Errorf("alice over plaintext: %v", err)
	}
	if err := produce(webTLS, withToken(trust, userToken), "granted-http-lookup"); err != nil {
		t.Errorf("alice over TLS with the https lookup: %v", err)
	}
	if err := produce(tlsURL, withToken(trust, userToken), "persistent://other/ns/t"); err == nil {
		t.Error("alice produced where she has no grant")
	}
	if err := produce(plainURL, pulsar.ClientOptions{}, "granted"); err == nil {
		t.Error("a client without credentials (no anonymous role) produced")
	}
}

func TestSecuritySettingsErrors(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		s    securitySettings
		want string
	}{
		{securitySettings{brokerPortTLS: 6651}, "tlsCertificateFilePath"},
		{securitySettings{authnEnabled: true, providers: "org.apache.pulsar.broker.authentication.AuthenticationProviderSasl"}, "not supported"},
		{securitySettings{authnEnabled: true, providers: "AuthenticationProviderToken"}, "not supported"},
		{securitySettings{authnEnabled: true, providers: "token"}, "tokenSecretKey or tokenPublicKey"},
		{securitySettings{authnEnabled: true, providers: "basic"}, "basicAuthConf"},
		{securitySettings{authnEnabled: true}, "authenticationProviders"},
	} {
		t.Setenv("PULSAR_EXTRA_OPTS", "")
		if _, err := tc.s.build(nil, log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.s, err, tc.want)
		}
	}
	if got := basicConfFromJavaOpts("-Xmx1g -Dpulsar.auth.basic.conf=/pulsar/conf/.htpasswd -Dx=y"); got != "/pulsar/conf/.htpasswd" {
		t.Errorf("basicConfFromJavaOpts = %q", got)
	}
	f := writeConf(t, "brokerServicePortTls=\nwebServicePortTls=8443\nbrokerServicePort=\n")
	s, err := parseStandaloneFlags([]string{"--config", f}, io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	if s.security.brokerPortTLS != 0 || s.security.webPortTLS != 8443 || s.brokerPort != portOff {
		t.Errorf("ports: TLS %d/%d, plaintext binary %d", s.security.brokerPortTLS, s.security.webPortTLS, s.brokerPort)
	}
}
