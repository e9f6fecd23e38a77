package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/metadata"
)

// Config is the proxy's configuration; the comments name proxy.conf's keys.
type Config struct {
	// Metadata is the cluster's metadata store (metadataStoreUrl), where
	// brokers register. Nil: BrokerServiceURL and BrokerWebServiceURL.
	Metadata metadata.Store
	// Reopen opens a new metadata session when Metadata's is lost (the
	// proxy holds no ephemeral state, so a new session loses nothing).
	// Nil: discovery keeps the last brokers it saw and logs the loss.
	Reopen func(ctx context.Context) (metadata.Store, error)
	// BrokerServiceURL (pulsar://host:port) and BrokerWebServiceURL
	// (http://host:port): static brokers (or a load balancer in front of
	// them) instead of discovery.
	BrokerServiceURL    string
	BrokerWebServiceURL string
	// BrokerServiceURLTLS (pulsar+ssl://host:port) and
	// BrokerWebServiceURLTLS (https://host:port): the static brokers' TLS
	// ports, used with BrokerTLS.
	BrokerServiceURLTLS    string
	BrokerWebServiceURLTLS string
	// Authentication (authenticationEnabled, authenticationProviders...):
	// clients are authenticated at CONNECT and on the web port, and their
	// role is passed to brokers as the original principal. Nil: off, and
	// clients' credentials reach the brokers unchecked by the proxy.
	Authentication *auth.Authenticator
	// Authorization (authorizationEnabled; superUserRoles and the grants
	// from the configuration store): the proxy also authorizes lookups
	// itself before asking a broker. Nil: the brokers alone decide.
	Authorization *auth.Authorizer
	// BrokerClient (brokerClientAuthenticationPlugin and ...Parameters)
	// is what the proxy presents to brokers; its role should be among the
	// brokers' proxyRoles. Nil: none.
	BrokerClient *auth.ClientCredentials
	// BrokerTLS (tlsEnabledWithBroker, brokerClientTrustCertsFilePath,
	// tlsHostnameVerificationEnabled): connections to brokers go to their
	// TLS ports with this configuration. Nil: plaintext.
	BrokerTLS *tls.Config
	// MaxConcurrentInboundConnections (default 10000): more are closed at
	// once. MaxConcurrentLookupRequests (default 50000): more are answered
	// TooManyRequests.
	MaxConcurrentInboundConnections int
	MaxConcurrentLookupRequests     int
	// BrokerProxyAllowedHostNames and BrokerProxyAllowedIPAddresses are
	// comma-separated ('*' wildcards in host names, CIDRs or addresses for
	// IPs; default "*"); BrokerProxyAllowedTargetPorts is ports and ranges
	// ("6650,6651", "6000-7000", "*"; default "6650,6651").
	BrokerProxyAllowedHostNames   string
	BrokerProxyAllowedIPAddresses string
	BrokerProxyAllowedTargetPorts string
	// ForwardAuthorizationCredentials (forwardAuthorizationCredentials):
	// send the client's auth data to the broker as original_auth_data.
	ForwardAuthorizationCredentials bool
	// MaxFrameSize bounds frames read in lookup mode and handshakes
	// (default 5 MiB + 10 KiB, the clients' limit for the default
	// maxMessageSize).
	MaxFrameSize int
	// HandshakeTimeout bounds the wait for CONNECT and for the broker's
	// CONNECTED (default 10 s); IdleTimeout closes a lookup-mode
	// connection that sent nothing, not even a PING (default 90 s; the
	// clients ping every 30 s).
	HandshakeTimeout time.Duration
	IdleTimeout      time.Duration
	// LookupTimeout bounds one request forwarded to a broker (default 30 s).
	LookupTimeout time.Duration
	// Version is the server_version in CONNECTED.
	Version  string
	Logger   *slog.Logger
	Registry prometheus.Registerer // metrics; nil: a private registry
}

func (c Config) withDefaults() Config {
	if c.MaxConcurrentInboundConnections <= 0 {
		c.MaxConcurrentInboundConnections = 10000
	}
	if c.MaxConcurrentLookupRequests <= 0 {
		c.MaxConcurrentLookupRequests = 50000
	}
	if c.BrokerProxyAllowedHostNames == "" {
		c.BrokerProxyAllowedHostNames = "*"
	}
	if c.BrokerProxyAllowedIPAddresses == "" {
		c.BrokerProxyAllowedIPAddresses = "*"
	}
	if c.BrokerProxyAllowedTargetPorts == "" {
		c.BrokerProxyAllowedTargetPorts = "6650,6651"
	}
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = 5<<20 + 10<<10
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 90 * time.Second
	}
	if c.LookupTimeout <= 0 {
		c.LookupTimeout = 30 * time.Second
	}
	if c.Version == "" {
		c.Version = "magnetar-proxy"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return c
}

// portRanges is brokerProxyAllowedTargetPorts parsed.
type portRanges [][2]int

func parsePorts(s string) (portRanges, error) {
	var r portRanges
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f == "*" {
			return portRanges{{0, 65535}}, nil
		}
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err != nil || a < 0 || b > 65535 || a > b {
			return nil, fmt.Errorf("brokerProxyAllowedTargetPorts: bad port or range %q", f)
		}
		r = append(r, [2]int{a, b})
	}
	return r, nil
}

func (r portRanges) allows(port int) bool {
	for _, pr := range r {
		if port >= pr[0] && port <= pr[1] {
			return true
		}
	}
	return false
}
