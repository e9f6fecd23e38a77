package auth

// The client side: what Magnetar's own components present when they
// connect to brokers (the proxy, and brokers calling each other or a
// remote cluster), under Pulsar's brokerClientAuthenticationPlugin and
// brokerClientAuthenticationParameters, and the TLS settings they dial
// with (brokerClientTlsEnabled, brokerClientTrustCertsFilePath,
// tlsEnabledWithBroker).
//
// Plugins and parameters, as Pulsar's client takes them (class name or
// short name):
//   - AuthenticationToken (token): token:<jwt>, file:///path (read again
//     on every use, so a rotated token file is picked up), {"token":...},
//     or the bare token.
//   - AuthenticationTls (tls): tlsCertFile:/path,tlsKeyFile:/path or the
//     same as JSON; the certificate is presented in the TLS handshake.
//   - AuthenticationBasic (basic): {"userId":...,"password":...} or
//     userId:u,password:p.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// ClientCredentials are a component's own credentials for brokers; the
// zero value (or nil) presents none.
type ClientCredentials struct {
	method    string
	token     string // inline token
	tokenFile string // or read from here each time
	basic     string // user:password
	cert      *tls.Certificate
}

// ClientPluginMethod maps a client authentication plugin (Pulsar's class
// name or the short name) to its method: "token", "tls", "basic", or ""
// for none.
func ClientPluginMethod(plugin string) (string, error) {
	switch p := strings.TrimSpace(plugin); p {
	case "", "none", "org.apache.pulsar.client.impl.auth.AuthenticationDisabled":
		return "", nil
	case "org.apache.pulsar.client.impl.auth.AuthenticationToken", "token":
		return "token", nil
	case "org.apache.pulsar.client.impl.auth.AuthenticationTls", "tls":
		return "tls", nil
	case "org.apache.pulsar.client.impl.auth.AuthenticationBasic", "basic":
		return "basic", nil
	default:
		return "", fmt.Errorf("authentication plugin %q is not supported (want AuthenticationToken, AuthenticationTls or AuthenticationBasic)", Clip(p))
	}
}

// ParseClientCredentials reads a plugin and its parameters.
func ParseClientCredentials(plugin, params string) (*ClientCredentials, error) {
	method, err := ClientPluginMethod(plugin)
	if err != nil {
		return nil, err
	}
	c := &ClientCredentials{method: method}
	kv := paramMap(params)
	switch method {
	case "token":
		switch p := strings.TrimSpace(params); {
		case strings.HasPrefix(p, "token:"):
			c.token = strings.TrimPrefix(p, "token:")
		case strings.HasPrefix(p, "file://"):
			c.tokenFile = strings.TrimPrefix(p, "file://")
			if _, err := c.readTokenFile(); err != nil {
				return nil, err
			}
		case kv["token"] != "":
			c.token = kv["token"]
		default:
			c.token = p
		}
		if c.token == "" && c.tokenFile == "" {
			return nil, errors.New("token authentication: the parameters give no token (want token:<jwt> or file:///path)")
		}
	case "tls":
		certFile, keyFile := kv["tlsCertFile"], kv["tlsKeyFile"]
		if certFile == "" || keyFile == "" {
			return nil, errors.New("tls authentication: want tlsCertFile:/path,tlsKeyFile:/path")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls authentication: %w", err)
		}
		c.cert = &cert
	case "basic":
		user, pass := kv["userId"], kv["password"]
		if user == "" || pass == "" {
			return nil, errors.New(`basic authentication: want {"userId":"...","password":"..."}`)
		}
		c.basic = user + ":" + pass
	}
	return c, nil
}

// paramMap reads JSON parameters or k:v,k:v pairs.
func paramMap(params string) map[string]string {
	m := map[string]string{}
	var js map[string]any
	if json.Unmarshal([]byte(params), &js) == nil {
		for k, v := range js {
			if s, ok := v.(string); ok {
				m[k] = s
			}
		}
		return m
	}
	for _, f := range strings.Split(params, ",") {
		if k, v, ok := strings.Cut(f, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func (c *ClientCredentials) readTokenFile() (string, error) {
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("token authentication: read token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("token authentication: token file %s is empty", c.tokenFile)
	}
	return t, nil
}

// Method is the auth_method_name to send ("" for none).
func (c *ClientCredentials) Method() string {
	if c == nil {
		return ""
	}
	return c.method
}

// AuthData is the binary protocol's auth_data for the method (nil for
// tls, whose credential is the certificate).
func (c *ClientCredentials) AuthData() ([]byte, error) {
	if c == nil {
		return nil, nil
	}
	switch c.method {
	case "token":
		if c.tokenFile != "" {
			t, err := c.readTokenFile()
			return []byte(t), err
		}
		return []byte(c.token), nil
	case "basic":
		return []byte(c.basic), nil
	}
	return nil, nil
}

// Certificate is the client certificate of the tls method (nil
// otherwise).
func (c *ClientCredentials) Certificate() *tls.Certificate {
	if c == nil {
		return nil
	}
	return c.cert
}

// SetHTTP puts the credentials on an HTTP request (Authorization: Bearer
// or Basic; the tls method's certificate goes in the TLS configuration).
func (c *ClientCredentials) SetHTTP(req *http.Request) error {
	data, err := c.AuthData()
	if err != nil {
		return err
	}
	switch c.Method() {
	case "token":
		req.Header.Set("Authorization", "Bearer "+string(data))
	case "basic":
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString(data))
	}
	return nil
}

// ClientTLS are the TLS settings a component dials brokers with.
type ClientTLS struct {
	// TrustCertsFile is the CA bundle (PEM) brokers' certificates must
	// chain to ("": the system's roots).
	TrustCertsFile string
	// AllowInsecure accepts any certificate (tlsAllowInsecureConnection).
	AllowInsecure bool
	// VerifyHostname checks the certificate names the host dialled
	// (tlsHostnameVerificationEnabled); off, the chain is still checked.
	VerifyHostname bool
}

// Config returns the *tls.Config to dial with, presenting creds'
// certificate when it has one.
func (t ClientTLS) Config(creds *ClientCredentials) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var roots *x509.CertPool
	if t.TrustCertsFile != "" {
		b, err := os.ReadFile(t.TrustCertsFile)
		if err != nil {
			return nil, fmt.Errorf("TLS trust certificates: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("TLS trust certificates: %s holds no PEM certificate", t.TrustCertsFile)
		}
	}
	cfg.RootCAs = roots
	if cert := creds.Certificate(); cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	switch {
	case t.AllowInsecure:
		cfg.InsecureSkipVerify = true
	case !t.VerifyHostname:
		// Pulsar's default: the chain is verified, the host name is not.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, roots) }
	}
	return cfg, nil
}

// verifyChain checks the server's chain against roots (nil: the system's)
// without its host name.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	if err != nil {
		return fmt.Errorf("tls: broker certificate: %w", err)
	}
	return nil
}

// RoundTripper wraps base (nil: http.DefaultTransport) so that every
// request carries the credentials.
func (c *ClientCredentials) RoundTripper(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if c.Method() == "" || c.Method() == "tls" {
		return base
	}
	return credentialTransport{creds: c, base: base}
}

type credentialTransport struct {
	creds *ClientCredentials
	base  http.RoundTripper
}

func (t credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if err := t.creds.SetHTTP(req); err != nil {
		return nil, err
	}
	return t.base.RoundTrip(req)
}
