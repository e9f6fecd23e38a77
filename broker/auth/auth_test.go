package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenProviderRefusesWhatPulsarRefuses(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	hmac, err := NewTokenProvider(TokenConfig{SecretKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubDER)
	if err != nil {
		t.Fatal(err)
	}
	rsaProv, err := NewTokenProvider(TokenConfig{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	aud, _ := NewTokenProvider(TokenConfig{SecretKey: secret, Audience: "brokers", AuthClaim: "role"})
	for _, tc := range []struct {
		name  string
		p     *TokenProvider
		token string
		role  string // "" = refused
	}{
		{"HS256", hmac, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "r"}), "r"},
		{"HS512", hmac, sign(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "r"}), "r"},
		{"not yet expired", hmac, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "r", "exp": time.Now().Add(time.Hour).Unix()}), "r"},
		{"expired", hmac, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "r", "exp": time.Now().Add(-time.Hour).Unix()}), ""},
		{"alg none", hmac, sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "r"}), ""},
		{"wrong secret", hmac, sign(t, jwt.SigningMethodHS256, []byte("x"), jwt.MapClaims{"sub": "r"}), ""},
		{"RS256 to an HMAC broker", hmac, sign(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"sub": "r"}), ""},
		{"no sub", hmac, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"name": "r"}), ""},
		{"garbage", hmac, "not.a.token", ""},
		{"RS256", rsaProv, sign(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"sub": "r"}), "r"},
		{"PS256", rsaProv, sign(t, jwt.SigningMethodPS256, rsaKey, jwt.MapClaims{"sub": "r"}), "r"},
		// The public key used as an HMAC secret (algorithm confusion).
		{"HS256 keyed with the public key", rsaProv, sign(t, jwt.SigningMethodHS256, pubDER, jwt.MapClaims{"sub": "r"}), ""},
		{"audience and claim", aud, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"role": "r", "aud": "brokers"}), "r"},
		{"audience in a list", aud, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"role": "r", "aud": []string{"x", "brokers"}}), "r"},
		{"wrong audience", aud, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"role": "r", "aud": "other"}), ""},
		{"no audience", aud, sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"role": "r"}), ""},
	} {
		role, err := tc.p.Authenticate(Credentials{Method: "token", Data: []byte(tc.token)})
		if role != tc.role || (tc.role == "" && !errors.Is(err, ErrUnauthenticated)) {
			t.Errorf("%s: role %q, err %v; want role %q", tc.name, role, err, tc.role)
		}
		if err != nil && strings.Contains(err.Error(), tc.token) {
			t.Errorf("%s: the error quotes the token", tc.name)
		}
	}
}

func TestReadKeyValue(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k")
	if err := os.WriteFile(p, []byte{1, 2, 3}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"file://" + p, "data:;base64,AQID", "AQID"} {
		b, err := ReadKeyValue(v)
		if err != nil || string(b) != "\x01\x02\x03" {
			t.Errorf("%s: %v %v", v, b, err)
		}
	}
}

// The Go client's suite's users file: admin with password 123456, $apr1$.
func TestBasicProviderMD5Crypt(t *testing.T) {
	p, err := ParseBasicUsers([]byte("# users\nadmin:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\nold:$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ data, role string }{
		{"admin:123456", "admin"}, {"admin:1234567", ""}, {"nobody:123456", ""}, {"admin", ""},
		{"old:password", "old"}, {"old:Password", ""},
	} {
		role, err := p.Authenticate(Credentials{Method: "basic", Data: []byte(tc.data)})
		if role != tc.role || (tc.role == "" && err == nil) {
			t.Errorf("%q: role %q, err %v; want %q", tc.data, role, err, tc.role)
		}
	}
	if _, err := ParseBasicUsers([]byte("u:plaintext\n")); err == nil {
		t.Error("a hash that cannot be checked was accepted")
	}
}

func TestAuthenticatorAnonymousAndMethods(t *testing.T) {
	a := NewAuthenticator("anon", TLSProvider{})
	if r, err := a.Authenticate(Credentials{}); r != "anon" || err != nil {
		t.Errorf("no credentials: %q %v", r, err)
	}
	if _, err := a.Authenticate(Credentials{Method: "token", Data: []byte("x")}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a method not enabled: %v", err)
	}
	if _, err := a.Authenticate(Credentials{Method: "tls"}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("tls without a certificate: %v", err)
	}
	if _, err := NewAuthenticator("").Authenticate(Credentials{}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("no credentials without an anonymous role: %v", err)
	}
	for _, name := range []string{"org.apache.pulsar.broker.authentication.AuthenticationProviderToken", "tls", "basic"} {
		if _, err := ProviderMethod(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := ProviderMethod("org.apache.pulsar.broker.authentication.AuthenticationProviderKerberos"); err == nil {
		t.Error("an unsupported provider was accepted")
	}
}

type fakePolicies struct {
	tenants    map[string]resources.TenantInfo
	namespaces map[string]resources.Policies
}

func (f fakePolicies) GetTenant(_ context.Context, name string) (resources.TenantInfo, error) {
	if t, ok := f.tenants[name]; ok {
		return t, nil
	}
	return resources.TenantInfo{}, resources.ErrNotFound
}

func (f fakePolicies) GetNamespaceCached(_ context.Context, tenant, ns string) (resources.Policies, error) {
	if p, ok := f.namespaces[tenant+"/"+ns]; ok {
		return p, nil
	}
	return resources.Policies{}, resources.ErrNotFound
}

func TestAuthorizerGrantsWildcardsAndSubscriptions(t *testing.T) {
	p := resources.NewPolicies()
	p.AuthPolicies.NamespaceAuth = map[string][]resources.AuthAction{"app-*": {resources.ActionProduce}, "reader": {resources.ActionConsume}}
	p.AuthPolicies.DestinationAuth = map[string]map[string][]resources.AuthAction{
		"persistent://t/ns/one": {"single": {resources.ActionConsume}}}
	p.AuthPolicies.SubscriptionAuthRoles = map[string][]string{"locked": {"someone-else"}}
	pol := fakePolicies{tenants: map[string]resources.TenantInfo{"t": {AdminRoles: []string{"boss"}}},
		namespaces: map[string]resources.Policies{"t/ns": p}}
	ctx := context.Background()
	topic := Topic{Tenant: "t", Namespace: "ns", Name: "persistent://t/ns/one"}
	for _, tc := range []struct {
		wildcards bool
		role      string
		op        Op
		sub       string
		ok        bool
	}{
		{false, "root", OpProduce, "", true},
		{false, "boss", OpConsume, "", true},
		{false, "app-1", OpProduce, "", false},
		{true, "app-1", OpProduce, "", true},
		{true, "app-1", OpConsume, "", false},
		{true, "app-1", OpLookup, "", true},
		{false, "reader", OpConsume, "s", true},
		{false, "reader", OpConsume, "locked", false},
		{false, "reader", OpProduce, "", false},
		{false, "single", OpConsume, "s", true},
		{false, "", OpLookup, "", false},
	} {
		z := NewAuthorizer([]string{"root"}, tc.wildcards, pol)
		err := z.AllowTopic(ctx, tc.role, tc.op, topic, tc.sub)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrForbidden)) {
			t.Errorf("wildcards=%v %q %s sub %q: %v, want allowed=%v", tc.wildcards, tc.role, tc.op, tc.sub, err, tc.ok)
		}
	}
	z := NewAuthorizer([]string{"root"}, false, pol)
	if err := z.AllowTenantAdmin(ctx, "boss", "t", "x"); err != nil {
		t.Error(err)
	}
	if err := z.AllowTenantAdmin(ctx, "boss", "missing", "x"); !errors.Is(err, ErrForbidden) {
		t.Errorf("admin of a tenant that does not exist: %v", err)
	}
}

// writeCert writes a self-signed certificate for cn and its key.
func writeCert(t *testing.T, dir, cn string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalECPrivateKey(key)
	_ = os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

func servedCN(t *testing.T, s *ServerTLS) string {
	t.Helper()
	cfg, err := s.Config().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

// The certificate is reloaded when its files change, at most every
// refresh interval; a broken file keeps the previous certificate.
func TestServerTLSReloadsTheCertificate(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "first")
	now := time.Now()
	s, err := NewServerTLS(TLSFiles{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"),
		RefreshInterval: time.Minute, Protocols: []string{"TLSv1.3"}, now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	writeCert(t, dir, "second")
	later := time.Now().Add(2 * time.Second)
	_ = os.Chtimes(filepath.Join(dir, "cert.pem"), later, later)
	if cn := servedCN(t, s); cn != "first" {
		t.Errorf("before the refresh interval: %s", cn)
	}
	now = now.Add(2 * time.Minute)
	if cn := servedCN(t, s); cn != "second" {
		t.Errorf("after the refresh interval: %s", cn)
	}
	_ = os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("broken"), 0o600)
	_ = os.Chtimes(filepath.Join(dir, "cert.pem"), later.Add(time.Second), later.Add(time.Second))
	now = now.Add(2 * time.Minute)
	if cn := servedCN(t, s); cn != "second" {
		t.Errorf("after a broken file: %s", cn)
	}
	if _, err := NewServerTLS(TLSFiles{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}); err == nil {
		t.Error("a broken certificate was loaded")
	}
}

func TestServerTLSOptions(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "b")
	files := TLSFiles{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), TrustCertsFile: filepath.Join(dir, "cert.pem")}
	for _, tc := range []struct {
		mutate func(*TLSFiles)
		want   tls.ClientAuthType
	}{
		{func(*TLSFiles) {}, tls.VerifyClientCertIfGiven},
		{func(f *TLSFiles) { f.RequireTrustedClientCert = true }, tls.RequireAndVerifyClientCert},
		{func(f *TLSFiles) { f.AllowInsecureConnection = true }, tls.RequestClientCert},
	} {
		f := files
		tc.mutate(&f)
		s, err := NewServerTLS(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := s.Config().GetConfigForClient(nil)
		if cfg.ClientAuth != tc.want || cfg.ClientCAs == nil {
			t.Errorf("%+v: ClientAuth %v, want %v", f, cfg.ClientAuth, tc.want)
		}
	}
	f := files
	f.Protocols, f.Ciphers = []string{"TLSv1.2"}, []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
	s, err := NewServerTLS(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := s.Config().GetConfigForClient(nil)
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS12 || len(cfg.CipherSuites) != 1 {
		t.Errorf("protocols and ciphers: %x %x %v", cfg.MinVersion, cfg.MaxVersion, cfg.CipherSuites)
	}
	for _, bad := range []func(*TLSFiles){
		func(f *TLSFiles) { f.Protocols = []string{"TLSv1"} },
		func(f *TLSFiles) { f.Ciphers = []string{"TLS_RSA_WITH_RC4_128_SHA"} },
		func(f *TLSFiles) { f.TrustCertsFile = filepath.Join(dir, "missing.pem") },
	} {
		f := files
		bad(&f)
		if _, err := NewServerTLS(f); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
}

type countingPolicies struct {
	fakePolicies
	reads int
}

func (c *countingPolicies) GetTenant(ctx context.Context, name string) (resources.TenantInfo, error) {
	c.reads++
	return c.fakePolicies.GetTenant(ctx, name)
}

// A tenant's admin roles are read once per tenantCacheTTL.
func TestAuthorizerCachesTenantsBriefly(t *testing.T) {
	pol := &countingPolicies{fakePolicies: fakePolicies{tenants: map[string]resources.TenantInfo{"t": {AdminRoles: []string{"boss"}}}}}
	z := NewAuthorizer(nil, false, pol)
	now := time.Now()
	z.now = func() time.Time { return now }
	for range 3 {
		if err := z.AllowTenantAdmin(context.Background(), "boss", "t", "x"); err != nil {
			t.Fatal(err)
		}
	}
	pol.tenants["t"] = resources.TenantInfo{AdminRoles: []string{"heir"}}
	now = now.Add(tenantCacheTTL)
	if err := z.AllowTenantAdmin(context.Background(), "boss", "t", "x"); !errors.Is(err, ErrForbidden) {
		t.Errorf("after the TTL the removed admin is still allowed: %v", err)
	}
	if pol.reads != 2 {
		t.Errorf("%d tenant reads, want 2", pol.reads)
	}
}
