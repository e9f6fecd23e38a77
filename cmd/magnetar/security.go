package main

// Security settings of standalone and broker under Pulsar's keys: the TLS
// ports, authentication and authorization (package broker/auth; see
// docs/security.md), and starting the four ports.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/broker"
	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/netio"
)

// portOff is a port left empty in the configuration: not served.
const portOff = -1

// securitySettings are the TLS, authentication and authorization keys.
type securitySettings struct {
	// brokerPortTLS and webPortTLS are brokerServicePortTls and
	// webServicePortTls; 0 (Pulsar's default, empty) is off.
	brokerPortTLS, webPortTLS    int
	certFile, keyFile, trustFile string
	allowInsecure, requireCert   bool
	protocols, ciphers           string
	certRefresh                  time.Duration
	tlsEnabled                   bool // deprecated tlsEnabled: read, not needed (a TLS port turns TLS on)

	authnEnabled                             bool
	providers, anonymousRole                 string
	tokenSecret, tokenPublic, tokenAuthClaim string
	tokenAudienceClaim, tokenAudience        string
	basicAuthConf                            string

	authzEnabled bool
	superUsers   string
	wildcards    bool
	proxyRoles   string
	refreshCheck time.Duration

	// The broker's own client side (brokerClient*).
	clientAuthPlugin, clientAuthParams string
	clientTLSEnabled, verifyHostname   bool
	clientTrustCerts                   string
}

func defaultSecuritySettings() securitySettings {
	return securitySettings{certRefresh: 300 * time.Second, refreshCheck: 60 * time.Second}
}

func (s *securitySettings) addSetters(setters map[string]confSetter) {
	for k, v := range map[string]confSetter{
		"brokerServicePortTls":                 setTLSPort(&s.brokerPortTLS),
		"webServicePortTls":                    setTLSPort(&s.webPortTLS),
		"tlsEnabled":                           setBool(&s.tlsEnabled),
		"tlsCertificateFilePath":               setString(&s.certFile),
		"tlsKeyFilePath":                       setString(&s.keyFile),
		"tlsTrustCertsFilePath":                setString(&s.trustFile),
		"tlsAllowInsecureConnection":           setBool(&s.allowInsecure),
		"tlsRequireTrustedClientCertOnConnect": setBool(&s.requireCert),
		"tlsProtocols":                         setString(&s.protocols),
		"tlsCiphers":                           setString(&s.ciphers),
		"tlsCertRefreshCheckDurationSec":       setDuration(&s.certRefresh, time.Second),
		"authenticationEnabled":                setBool(&s.authnEnabled),
		"authenticationProviders":              setString(&s.providers),
		"anonymousUserRole":                    setString(&s.anonymousRole),
		"tokenSecretKey":                       setString(&s.tokenSecret),
		"tokenPublicKey":                       setString(&s.tokenPublic),
		"tokenAuthClaim":                       setString(&s.tokenAuthClaim),
		"tokenAudienceClaim":                   setString(&s.tokenAudienceClaim),
		"tokenAudience":                        setString(&s.tokenAudience),
		"basicAuthConf":                        setString(&s.basicAuthConf),
		"authorizationEnabled":                 setBool(&s.authzEnabled),
		"superUserRoles":                       setString(&s.superUsers),
		"authorizationAllowWildcardsMatching":  setBool(&s.wildcards),
		"proxyRoles":                           setString(&s.proxyRoles),
		"brokerClientAuthenticationPlugin":     setString(&s.clientAuthPlugin),
		"brokerClientAuthenticationParameters": setString(&s.clientAuthParams),
		"brokerClientTlsEnabled":               setBool(&s.clientTLSEnabled),
		"brokerClientTrustCertsFilePath":       setString(&s.clientTrustCerts),
		"tlsHostnameVerificationEnabled":       setBool(&s.verifyHostname),
		"authenticationRefreshCheckSeconds":    setDuration(&s.refreshCheck, time.Second),
	} {
		setters[k] = v
	}
}

// setPort reads a port; empty means not served (Pulsar's Optional ports).
func setPort(p *int) confSetter {
	return func(v string) error {
		if v == "" {
			*p = portOff
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("want an integer port (0-65535), or nothing for off, got %q", v)
		}
		*p = n
		return nil
	}
}

// setTLSPort reads a TLS port; empty is off (0).
func setTLSPort(p *int) confSetter {
	return func(v string) error {
		if err := setPort(p)(v); err != nil {
			return err
		}
		*p = max(*p, 0)
		return nil
	}
}

// security is what the settings build: nil parts are off.
type security struct {
	authn *auth.Authenticator
	authz *auth.Authorizer
	tls   *auth.ServerTLS
	// client and clientTLS are the broker's own credentials and TLS
	// towards other brokers (clientTLS nil: plaintext).
	client    *auth.ClientCredentials
	clientTLS *tls.Config
}

// build checks the settings and builds providers, authorizer and TLS.
func (s *securitySettings) build(res *resources.Resources, log *slog.Logger) (security, error) {
	var sec security
	if s.brokerPortTLS > 0 || s.webPortTLS > 0 {
		t, err := auth.NewServerTLS(auth.TLSFiles{CertFile: s.certFile, KeyFile: s.keyFile, TrustCertsFile: s.trustFile,
			AllowInsecureConnection: s.allowInsecure, RequireTrustedClientCert: s.requireCert,
			Protocols: splitList(s.protocols), Ciphers: splitList(s.ciphers), RefreshInterval: s.certRefresh, Logger: log})
		if err != nil {
			return sec, err
		}
		sec.tls = t
	}
	if s.authnEnabled {
		var providers []auth.Provider
		for _, name := range splitList(s.providers) {
			method, err := auth.ProviderMethod(name)
			if err != nil {
				return sec, err
			}
			p, err := s.provider(method)
			if err != nil {
				return sec, err
			}
			providers = append(providers, p)
		}
		if len(providers) == 0 && s.anonymousRole == "" {
			return sec, errors.New("authenticationEnabled=true needs authenticationProviders (or anonymousUserRole)")
		}
		sec.authn = auth.NewAuthenticator(s.anonymousRole, providers...)
	}
	var err error
	if sec.client, err = auth.ParseClientCredentials(s.clientAuthPlugin, s.clientAuthParams); err != nil {
		return sec, fmt.Errorf("brokerClientAuthenticationPlugin: %w", err)
	}
	if s.clientTLSEnabled {
		if sec.clientTLS, err = s.clientTLS().Config(sec.client); err != nil {
			return sec, fmt.Errorf("brokerClientTlsEnabled: %w", err)
		}
	}
	if s.authzEnabled {
		if !s.authnEnabled {
			log.Warn("authorizationEnabled without authenticationEnabled: clients have no role, so only what needs none is allowed")
		}
		sec.authz = auth.NewAuthorizer(splitList(s.superUsers), s.wildcards, res)
	}
	return sec, nil
}

// clientTLS are the broker's TLS settings towards other brokers.
func (s *securitySettings) clientTLS() auth.ClientTLS {
	trust := s.clientTrustCerts
	if trust == "" {
		trust = s.trustFile
	}
	return auth.ClientTLS{TrustCertsFile: trust, AllowInsecure: s.allowInsecure, VerifyHostname: s.verifyHostname}
}

func (s *securitySettings) provider(method string) (auth.Provider, error) {
	switch method {
	case "tls":
		return auth.TLSProvider{}, nil
	case "basic":
		conf := s.basicAuthConf
		if conf == "" {
			conf = basicConfFromJavaOpts(os.Getenv("PULSAR_EXTRA_OPTS"))
		}
		if conf == "" {
			return nil, errors.New("AuthenticationProviderBasic needs basicAuthConf (the user:hash file), or -Dpulsar.auth.basic.conf in PULSAR_EXTRA_OPTS")
		}
		return auth.LoadBasicProvider(conf)
	}
	cfg := auth.TokenConfig{AuthClaim: s.tokenAuthClaim, AudienceClaim: s.tokenAudienceClaim, Audience: s.tokenAudience}
	switch {
	case s.tokenSecret != "":
		key, err := auth.ReadKeyValue(s.tokenSecret)
		if err != nil {
			return nil, fmt.Errorf("tokenSecretKey: %w", err)
		}
		cfg.SecretKey = key
	case s.tokenPublic != "":
		b, err := auth.ReadKeyValue(s.tokenPublic)
		if err != nil {
			return nil, fmt.Errorf("tokenPublicKey: %w", err)
		}
		if cfg.PublicKey, err = auth.ParsePublicKey(b); err != nil {
			return nil, fmt.Errorf("tokenPublicKey: %w", err)
		}
	}
	return auth.NewTokenProvider(cfg)
}

// apply puts the security into the broker's configuration; l gives the
// TLS ports' advertised addresses.
func (sec security) apply(cfg *broker.Config, l listenFlags, s securitySettings) {
	cfg.Authentication, cfg.Authorization = sec.authn, sec.authz
	cfg.ProxyRoles, cfg.AuthenticationRefreshCheck = splitList(s.proxyRoles), s.refreshCheck
	cfg.BrokerClient, cfg.BrokerClientTLSEnabled, cfg.BrokerClientTLS = sec.client, s.clientTLSEnabled, s.clientTLS()
	if s.brokerPortTLS > 0 {
		cfg.AdvertisedAddressTLS = net.JoinHostPort(l.advertised, strconv.Itoa(s.brokerPortTLS))
	}
	if s.webPortTLS > 0 {
		cfg.AdvertisedWebAddressTLS = net.JoinHostPort(l.advertised, strconv.Itoa(s.webPortTLS))
	}
}

// peerHTTP is the HTTP client for admin calls to other brokers (unload,
// split): the broker's credentials and TLS trust.
func (sec security) peerHTTP() *http.Client {
	return &http.Client{Timeout: 30 * time.Second,
		Transport: sec.client.RoundTripper(&http.Transport{TLSClientConfig: sec.clientTLS})}
}

// tlsURLs are the TLS ports' URLs for the broker registry ("" when off).
func (s securitySettings) tlsURLs(l listenFlags) (pulsarTLS, webTLS string) {
	if s.brokerPortTLS > 0 {
		pulsarTLS = "pulsar+ssl://" + net.JoinHostPort(l.advertised, strconv.Itoa(s.brokerPortTLS))
	}
	if s.webPortTLS > 0 {
		webTLS = "https://" + net.JoinHostPort(l.advertised, strconv.Itoa(s.webPortTLS))
	}
	return pulsarTLS, webTLS
}

// ports are the listeners a broker serves on, nil when off.
type ports struct {
	bin         *netio.Server
	binTLS      *broker.TLSServer
	web, webTLS *http.Server
}

// servePorts starts the binary and HTTP ports, plaintext and TLS, each
// unless its port is off.
func servePorts(b *broker.Broker, l listenFlags, s securitySettings, sec security, log *slog.Logger, extra ...prometheus.Collector) (*ports, error) {
	p := &ports{}
	fail := func(err error) (*ports, error) {
		_ = p.close(context.Background())
		return nil, err
	}
	var err error
	if l.brokerPort != portOff {
		if p.bin, err = b.Serve(net.JoinHostPort(l.bindAddr, strconv.Itoa(l.brokerPort))); err != nil {
			return fail(err)
		}
	}
	if s.brokerPortTLS > 0 {
		if p.binTLS, err = b.ServeTLS(net.JoinHostPort(l.bindAddr, strconv.Itoa(s.brokerPortTLS)), sec.tls.Config()); err != nil {
			return fail(err)
		}
	}
	mux := webMux(b, extra...)
	if l.webPort != portOff {
		if p.web, err = serveHTTP(net.JoinHostPort(l.bindAddr, strconv.Itoa(l.webPort)), mux, "web service (HTTP lookup)", log); err != nil {
			return fail(err)
		}
	}
	if s.webPortTLS > 0 {
		if p.webTLS, err = serveHTTPTLS(net.JoinHostPort(l.bindAddr, strconv.Itoa(s.webPortTLS)), mux, sec.tls.Config(), "web service (HTTPS)", log); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

func (p *ports) close(ctx context.Context) error {
	var errs []error
	if p.web != nil {
		errs = append(errs, p.web.Shutdown(ctx))
	}
	if p.webTLS != nil {
		errs = append(errs, p.webTLS.Shutdown(ctx))
	}
	if p.bin != nil {
		errs = append(errs, p.bin.Close(ctx))
	}
	if p.binTLS != nil {
		errs = append(errs, p.binTLS.Close(ctx))
	}
	return errors.Join(errs...)
}

// serveHTTPTLS is serveHTTP over TLS.
func serveHTTPTLS(addr string, mux *http.ServeMux, cfg *tls.Config, what string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	srv := broker.NewHTTPServer(mux)
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn) // handshake failures, with the remote address
	go func() {
		if err := srv.Serve(tls.NewListener(ln, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" stopped", "err", err)
		}
	}()
	return srv, nil
}

// basicConfFromJavaOpts finds Pulsar's -Dpulsar.auth.basic.conf=PATH in
// JVM options (PULSAR_EXTRA_OPTS), so a setup made for Pulsar's scripts
// works unchanged.
func basicConfFromJavaOpts(opts string) string {
	for _, o := range strings.Fields(opts) {
		if v, ok := strings.CutPrefix(o, "-Dpulsar.auth.basic.conf="); ok {
			return v
		}
	}
	return ""
}
