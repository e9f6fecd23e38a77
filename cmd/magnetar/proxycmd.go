package main

// magnetar proxy: the Pulsar proxy (package proxy), a stateless gateway to
// every broker of a cluster. It discovers the brokers in the metadata
// store (or uses static brokerServiceURL/brokerWebServiceURL) and reads
// Pulsar's proxy.conf keys.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/proxy"
)

const defaultProxyConf = "conf/proxy.conf"

type proxyFlags struct {
	config, metadataURL, configURL string
	bindAddr                       string
	servicePort, webPort           int
	sessionTimeout                 time.Duration
	cfg                            proxy.Config
	// sec are the TLS ports (servicePortTls, webServicePortTls),
	// authentication and authorization, under the broker's keys
	// (security.go).
	sec securitySettings
	// The proxy's side towards brokers.
	tlsWithBroker, verifyBrokerHostname            bool
	brokerTrustCerts                               string
	brokerClientAuthPlugin, brokerClientAuthParams string
}

func parseProxyFlags(args []string, stderr io.Writer, log *slog.Logger) (proxyFlags, error) {
	f := proxyFlags{bindAddr: "0.0.0.0", servicePort: 6650, webPort: 8080, sessionTimeout: 30 * time.Second,
		sec: defaultSecuritySettings()}
	fs := flag.NewFlagSet("magnetar proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file in Pulsar's proxy.conf format (default "+defaultProxyConf+" if present)")
	fs.StringVar(&f.metadataURL, "metadata-store", "", "metadataStoreUrl: where brokers register (zk:host:2181,.../chroot)")
	fs.StringVar(&f.configURL, "configuration-metadata-store", "", "configurationMetadataStoreUrl: grants and tenants, for authorizationEnabled (default: the metadata store)")
	fs.StringVar(&f.bindAddr, "bind-address", f.bindAddr, "bindAddress")
	fs.IntVar(&f.servicePort, "service-port", f.servicePort, "servicePort: the binary protocol (-1: off)")
	fs.IntVar(&f.webPort, "web-port", f.webPort, "webServicePort: lookups, admin API, /metrics, /status.html, pprof (-1: off)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	byFlag := map[string]bool{}
	keys := map[string]string{"metadata-store": "metadataStoreUrl", "configuration-metadata-store": "configurationMetadataStoreUrl",
		"bind-address": "bindAddress", "service-port": "servicePort", "web-port": "webServicePort"}
	fs.Visit(func(fl *flag.Flag) { byFlag[keys[fl.Name]] = true })
	if path := confFile(f.config, defaultProxyConf); path != "" {
		conf, err := readConf(path)
		if err != nil {
			return f, err
		}
		if err := applyConf(conf, f.setters(), byFlag, log, path); err != nil {
			return f, err
		}
	}
	return f, f.check()
}

func (f *proxyFlags) setters() map[string]confSetter {
	c := &f.cfg
	setters := map[string]confSetter{}
	f.sec.addSetters(setters)
	for k, v := range map[string]confSetter{
		"metadataStoreUrl":                     setString(&f.metadataURL),
		"configurationMetadataStoreUrl":        setString(&f.configURL),
		"metadataStoreSessionTimeoutMillis":    setDuration(&f.sessionTimeout, time.Millisecond),
		"bindAddress":                          setString(&f.bindAddr),
		"servicePort":                          setPort(&f.servicePort),
		"webServicePort":                       setPort(&f.webPort),
		"servicePortTls":                       setTLSPort(&f.sec.brokerPortTLS),
		"webServicePortTls":                    setTLSPort(&f.sec.webPortTLS),
		"brokerServiceURL":                     setString(&c.BrokerServiceURL),
		"brokerWebServiceURL":                  setString(&c.BrokerWebServiceURL),
		"brokerServiceURLTLS":                  setString(&c.BrokerServiceURLTLS),
		"brokerWebServiceURLTLS":               setString(&c.BrokerWebServiceURLTLS),
		"forwardAuthorizationCredentials":      setBool(&c.ForwardAuthorizationCredentials),
		"brokerClientAuthenticationPlugin":     setString(&f.brokerClientAuthPlugin),
		"brokerClientAuthenticationParameters": setString(&f.brokerClientAuthParams),
		"tlsEnabledWithBroker":                 setBool(&f.tlsWithBroker),
		"brokerClientTrustCertsFilePath":       setString(&f.brokerTrustCerts),
		"tlsHostnameVerificationEnabled":       setBool(&f.verifyBrokerHostname),
		"maxConcurrentInboundConnections":      setInt(&c.MaxConcurrentInboundConnections),
		"maxConcurrentLookupRequests":          setInt(&c.MaxConcurrentLookupRequests),
		"brokerProxyAllowedHostNames":          setString(&c.BrokerProxyAllowedHostNames),
		"brokerProxyAllowedIPAddresses":        setString(&c.BrokerProxyAllowedIPAddresses),
		"brokerProxyAllowedTargetPorts":        setString(&c.BrokerProxyAllowedTargetPorts),
	} {
		setters[k] = v
	}
	delete(setters, "brokerServicePortTls") // the broker's key; servicePortTls here
	return setters
}

func (f *proxyFlags) check() error {
	if f.metadataURL == "" && (f.cfg.BrokerServiceURL == "" || f.cfg.BrokerWebServiceURL == "") {
		return errors.New("--metadata-store (metadataStoreUrl) is required, or brokerServiceURL and brokerWebServiceURL in the config")
	}
	if f.tlsWithBroker && f.metadataURL == "" && f.cfg.BrokerServiceURLTLS == "" {
		return errors.New("tlsEnabledWithBroker with static brokers needs brokerServiceURLTLS (and brokerWebServiceURLTLS)")
	}
	return nil
}

// brokerSide builds the proxy's credentials and TLS towards brokers.
func (f *proxyFlags) brokerSide(cfg *proxy.Config) error {
	creds, err := auth.ParseClientCredentials(f.brokerClientAuthPlugin, f.brokerClientAuthParams)
	if err != nil {
		return fmt.Errorf("brokerClientAuthenticationPlugin: %w", err)
	}
	cfg.BrokerClient = creds
	if !f.tlsWithBroker {
		return nil
	}
	trust := f.brokerTrustCerts
	if trust == "" {
		trust = f.sec.trustFile
	}
	cfg.BrokerTLS, err = auth.ClientTLS{TrustCertsFile: trust, AllowInsecure: f.sec.allowInsecure,
		VerifyHostname: f.verifyBrokerHostname}.Config(creds)
	if err != nil {
		return fmt.Errorf("tlsEnabledWithBroker: %w", err)
	}
	return nil
}

func runProxy(args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f, err := parseProxyFlags(args, stderr, log)
	if err != nil {
		fmt.Fprintf(stderr, "magnetar proxy: %v\n", err)
		return 2
	}
	return serveUntilSignal("magnetar proxy", stderr, func(ctx context.Context) error {
		return serveProxy(ctx, f, log, stdout)
	})
}

func serveProxy(ctx context.Context, f proxyFlags, log *slog.Logger, stdout io.Writer) error {
	cfg := f.cfg
	if f.metadataURL != "" {
		octx, cancel := context.WithTimeout(ctx, f.sessionTimeout+10*time.Second)
		store, err := metadata.Open(octx, f.metadataURL, metadata.Options{Logger: log, SessionTimeout: f.sessionTimeout})
		cancel()
		if err != nil {
			return fmt.Errorf("metadata store %s: %w", f.metadataURL, err)
		}
		defer store.Close()
		cfg.Metadata = store
		cfg.Reopen = func(ctx context.Context) (metadata.Store, error) {
			octx, cancel := context.WithTimeout(ctx, f.sessionTimeout+10*time.Second)
			defer cancel()
			return metadata.Open(octx, f.metadataURL, metadata.Options{Logger: log, SessionTimeout: f.sessionTimeout})
		}
	}
	if err := f.brokerSide(&cfg); err != nil {
		return err
	}
	sec, err := f.proxySecurity(ctx, cfg.Metadata, log)
	if err != nil {
		return err
	}
	cfg.Authentication, cfg.Authorization = sec.authn, sec.authz
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registry, cfg.Logger, cfg.Version = reg, log, "magnetar-proxy-"+version
	p, err := proxy.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	mux := http.NewServeMux()
	addOpsHandlers(mux, registryHandler(reg))
	mux.Handle("/", p.HTTPHandler())
	var ready []string
	var webs []*http.Server
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, w := range webs {
			_ = w.Shutdown(sctx)
		}
	}()
	if f.servicePort != portOff {
		addr, err := p.Serve(net.JoinHostPort(f.bindAddr, strconv.Itoa(f.servicePort)))
		if err != nil {
			return err
		}
		ready = append(ready, "pulsar://"+addr.String())
	}
	if f.sec.brokerPortTLS > 0 {
		addr, err := p.ServeTLS(net.JoinHostPort(f.bindAddr, strconv.Itoa(f.sec.brokerPortTLS)), sec.tls.Config())
		if err != nil {
			return err
		}
		ready = append(ready, "pulsar+ssl://"+addr.String())
	}
	if f.webPort != portOff {
		webAddr := net.JoinHostPort(f.bindAddr, strconv.Itoa(f.webPort))
		web, err := serveHTTP(webAddr, mux, "proxy web service", log)
		if err != nil {
			return err
		}
		webs = append(webs, web)
		ready = append(ready, "http://"+webAddr)
	}
	if f.sec.webPortTLS > 0 {
		webAddr := net.JoinHostPort(f.bindAddr, strconv.Itoa(f.sec.webPortTLS))
		web, err := serveHTTPTLS(webAddr, mux, sec.tls.Config(), "proxy web service (HTTPS)", log)
		if err != nil {
			return err
		}
		webs = append(webs, web)
		ready = append(ready, "https://"+webAddr)
	}
	fmt.Fprintf(stdout, "magnetar proxy ready: %s\n", strings.Join(ready, " "))
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}

// proxySecurity builds TLS, authentication and authorization; grants are
// read from the configuration store (else the metadata store).
func (f *proxyFlags) proxySecurity(ctx context.Context, clusterStore metadata.Store, log *slog.Logger) (security, error) {
	var res *resources.Resources
	if f.sec.authzEnabled {
		store := clusterStore
		if f.configURL != "" && f.configURL != f.metadataURL {
			octx, cancel := context.WithTimeout(ctx, f.sessionTimeout+10*time.Second)
			cs, err := metadata.Open(octx, f.configURL, metadata.Options{Logger: log, SessionTimeout: f.sessionTimeout})
			cancel()
			if err != nil {
				return security{}, fmt.Errorf("configuration metadata store %s: %w", f.configURL, err)
			}
			go func() { <-ctx.Done(); cs.Close() }()
			store = cs
		}
		if store == nil {
			return security{}, errors.New("authorizationEnabled needs the configuration metadata store (configurationMetadataStoreUrl) for grants and tenants")
		}
		var err error
		if res, err = resources.New(ctx, store, resources.Options{}); err != nil {
			return security{}, fmt.Errorf("authorization: %w", err)
		}
		go func() { <-ctx.Done(); res.Close() }()
	}
	return f.sec.build(res, log)
}
