// Package proxy is Magnetar's Pulsar proxy: one gateway in front of every
// broker of a cluster, for clients that cannot reach the brokers. It keeps
// no state of its own, so any number of proxies may run side by side.
//
// Behaviour (binary protocol, as Pulsar's ProxyConnection does it):
//
//   - The first frame must be CONNECT, within HandshakeTimeout.
//   - CONNECT without proxy_to_broker_url: lookup mode. The proxy answers
//     CONNECTED itself, then LOOKUP, PARTITIONED_METADATA,
//     GET_TOPICS_OF_NAMESPACE and GET_SCHEMA by forwarding each to a broker
//     over a pooled connection of its own (request ids rewritten), PING
//     with PONG. LOOKUP follows the brokers' redirects (at most 20) and
//     answers Connect with proxy_through_service_url set, so the client
//     comes back to the proxy naming the broker. Other commands close the
//     connection.
//   - CONNECT with proxy_to_broker_url: direct mode. The target must be a
//     broker registered in the metadata store (or the static
//     brokerServiceURL) on an allowed host, address and port
//     (CVE-2022-24280); otherwise the client gets ERROR and is closed. The
//     proxy dials the broker, sends the client's CONNECT without
//     proxy_to_broker_url (the client's version and feature flags kept, its
//     principal in original_principal), hands the broker's answer back
//     unchanged and from then on copies bytes both ways with io.Copy
//     between the two *net.TCPConn, which is splice(2) on Linux: the
//     payload never enters user space. Back-pressure is the kernel's: a
//     side that does not read stops the copy, which stops reading the
//     other side. One side's EOF half-closes the other; both done or an
//     error closes both.
//   - Connections past MaxConcurrentInboundConnections are closed at once
//     (counted as rejected); lookups past MaxConcurrentLookupRequests are
//     answered TooManyRequests.
//
// HTTP (http.go): /lookup and /admin are forwarded to a broker, the
// proxy following the brokers' redirects itself (only to registered
// brokers); /metrics, /status.html and pprof are served locally.
//
// TLS and authentication (security.go): ServeTLS serves the same
// protocol over TLS; with Authentication clients are authenticated at
// CONNECT (and on the web port) and named to brokers as original_principal
// (X-Original-Principal) while the proxy presents BrokerClient; with
// BrokerTLS brokers are reached on their TLS ports. Spliced forwarding
// needs plaintext on both sides; with TLS on either, a pooled buffer per
// direction carries the bytes.
package proxy
