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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
	// Security settings: read so that a file asking for them is refused
	// rather than silently served without (they come with the security
	// work).
	servicePortTLS, webPortTLS, brokerServiceURLTLS, brokerWebServiceURLTLS string
	authn, authz, tlsWithBroker                                             bool
	brokerClientAuthPlugin, brokerClientAuthParams                          string
}

func parseProxyFlags(args []string, stderr io.Writer, log *slog.Logger) (proxyFlags, error) {
	f := proxyFlags{bindAddr: "0.0.0.0", servicePort: 6650, webPort: 8080, sessionTimeout: 30 * time.Second}
	fs := flag.NewFlagSet("magnetar proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration file in Pulsar's proxy.conf format (default "+defaultProxyConf+" if present)")
	fs.StringVar(&f.metadataURL, "metadata-store", "", "metadataStoreUrl: where brokers register (zk:host:2181,.../chroot)")
	fs.StringVar(&f.configURL, "configuration-metadata-store", "", "configurationMetadataStoreUrl (kept for authorization; not read yet)")
	fs.StringVar(&f.bindAddr, "bind-address", f.bindAddr, "bindAddress")
	fs.IntVar(&f.servicePort, "service-port", f.servicePort, "servicePort: the binary protocol")
	fs.IntVar(&f.webPort, "web-port", f.webPort, "webServicePort: lookups, admin API, /metrics, /status.html, pprof")
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
	return map[string]confSetter{
		"metadataStoreUrl":                     setString(&f.metadataURL),
		"configurationMetadataStoreUrl":        setString(&f.configURL),
		"metadataStoreSessionTimeoutMillis":    setDuration(&f.sessionTimeout, time.Millisecond),
		"bindAddress":                          setString(&f.bindAddr),
		"servicePort":                          setInt(&f.servicePort),
		"webServicePort":                       setInt(&f.webPort),
		"servicePortTls":                       setString(&f.servicePortTLS),
		"webServicePortTls":                    setString(&f.webPortTLS),
		"brokerServiceURL":                     setString(&c.BrokerServiceURL),
		"brokerWebServiceURL":                  setString(&c.BrokerWebServiceURL),
		"brokerServiceURLTLS":                  setString(&f.brokerServiceURLTLS),
		"brokerWebServiceURLTLS":               setString(&f.brokerWebServiceURLTLS),
		"authenticationEnabled":                setBool(&f.authn),
		"authorizationEnabled":                 setBool(&f.authz),
		"forwardAuthorizationCredentials":      setBool(&c.ForwardAuthorizationCredentials),
		"brokerClientAuthenticationPlugin":     setString(&f.brokerClientAuthPlugin),
		"brokerClientAuthenticationParameters": setString(&f.brokerClientAuthParams),
		"tlsEnabledWithBroker":                 setBool(&f.tlsWithBroker),
		"maxConcurrentInboundConnections":      setInt(&c.MaxConcurrentInboundConnections),
		"maxConcurrentLookupRequests":          setInt(&c.MaxConcurrentLookupRequests),
		"brokerProxyAllowedHostNames":          setString(&c.BrokerProxyAllowedHostNames),
		"brokerProxyAllowedIPAddresses":        setString(&c.BrokerProxyAllowedIPAddresses),
		"brokerProxyAllowedTargetPorts":        setString(&c.BrokerProxyAllowedTargetPorts),
	}
}

func (f *proxyFlags) check() error {
	if f.metadataURL == "" && (f.cfg.BrokerServiceURL == "" || f.cfg.BrokerWebServiceURL == "") {
		return errors.New("--metadata-store (metadataStoreUrl) is required, or brokerServiceURL and brokerWebServiceURL in the config")
	}
	switch {
	case f.authn || f.authz:
		return errors.New("authenticationEnabled/authorizationEnabled: the proxy has no authentication yet (it comes with the security work); refusing to run open")
	case f.servicePortTLS != "" || f.webPortTLS != "" || f.tlsWithBroker:
		return errors.New("servicePortTls/webServicePortTls/tlsEnabledWithBroker: the proxy has no TLS yet (it comes with the security work)")
	case f.brokerClientAuthPlugin != "":
		return errors.New("brokerClientAuthenticationPlugin: the proxy cannot authenticate to brokers yet (it comes with the security work)")
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
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registry, cfg.Logger, cfg.Version = reg, log, "magnetar-proxy-"+version
	p, err := proxy.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	addr, err := p.Serve(net.JoinHostPort(f.bindAddr, strconv.Itoa(f.servicePort)))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	addOpsHandlers(mux, reg)
	mux.Handle("/", p.HTTPHandler())
	webAddr := net.JoinHostPort(f.bindAddr, strconv.Itoa(f.webPort))
	web, err := serveHTTP(webAddr, mux, "proxy web service", log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "magnetar proxy ready: pulsar://%s http://%s\n", addr, webAddr)
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return web.Shutdown(sctx)
}
