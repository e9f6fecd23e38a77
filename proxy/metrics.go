package proxy

import "github.com/prometheus/client_golang/prometheus"

// metrics are Pulsar's proxy metric names (pulsar_proxy_*), plus bytes by
// direction.
type metrics struct {
	active, activeDirect       prometheus.Gauge
	newConns, rejected         prometheus.Counter
	bytes, bytesIn, bytesOut   prometheus.Counter
	lookups, partitions        prometheus.Counter
	topicsOfNS, schemas        prometheus.Counter
	rejectedLookups, refused   prometheus.Counter
	lookupFailures, httpErrors prometheus.Counter
	authFailures, tlsFailures  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	g := func(name, help string) prometheus.Gauge {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		reg.MustRegister(m)
		return m
	}
	c := func(name, help string) prometheus.Counter {
		m := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(m)
		return m
	}
	return &metrics{
		active:          g("pulsar_proxy_active_connections", "client connections open now"),
		activeDirect:    g("pulsar_proxy_active_direct_connections", "client connections piped to a broker now"),
		newConns:        c("pulsar_proxy_new_connections", "client connections accepted"),
		rejected:        c("pulsar_proxy_rejected_connections", "client connections closed at once: over maxConcurrentInboundConnections"),
		bytes:           c("pulsar_proxy_binary_bytes", "bytes piped between clients and brokers, both ways"),
		bytesIn:         c("pulsar_proxy_binary_bytes_in", "bytes piped from clients to brokers"),
		bytesOut:        c("pulsar_proxy_binary_bytes_out", "bytes piped from brokers to clients"),
		lookups:         c("pulsar_proxy_lookup_requests", "LOOKUP requests answered"),
		partitions:      c("pulsar_proxy_partitions_metadata_requests", "PARTITIONED_METADATA requests answered"),
		topicsOfNS:      c("pulsar_proxy_get_topics_of_namespace_requests", "GET_TOPICS_OF_NAMESPACE requests answered"),
		schemas:         c("pulsar_proxy_get_schema_requests", "GET_SCHEMA requests answered"),
		rejectedLookups: c("pulsar_proxy_rejected_lookup_requests", "lookup-type requests refused: over maxConcurrentLookupRequests"),
		lookupFailures:  c("pulsar_proxy_lookup_failures", "lookup-type requests that no broker answered"),
		refused:         c("pulsar_proxy_refused_targets", "proxy_to_broker_url targets refused (unregistered broker or not allowed)"),
		httpErrors:      c("pulsar_proxy_http_forward_errors", "HTTP requests no broker could be reached for"),
		authFailures:    c("pulsar_proxy_authentication_failures", "clients refused for their credentials (binary and HTTP)"),
		tlsFailures:     c("pulsar_proxy_tls_handshake_failures", "TLS handshakes with clients that failed"),
	}
}
