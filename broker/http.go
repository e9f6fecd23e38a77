package broker

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire"
)

// HTTPHandler serves the broker's HTTP port: topic lookup (for http://
// service URLs), partition counts and creation, the admin REST API (topics,
// stats and subscriptions in admin_*.go; brokers, bundles, bookies and
// dynamic configuration; schemas in broker/schema; clusters, tenants and
// namespaces in broker/admin) and /status.html.
func (b *Broker) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", b.httpLookup)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions", b.httpPartitions)
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions", b.httpCreatePartitioned)
	b.registerClusterAdmin(mux)
	b.registerBookiesAdmin(mux)
	b.registerDynamicConfigAdmin(mux)
	b.registerAdmin(mux)
	if b.cfg.Resources != nil {
		admin.Register(mux, admin.Config{Resources: b.cfg.Resources, Namespaces: b,
			ClusterName: b.cfg.ClusterName, Logger: b.log})
	}
	mux.HandleFunc("GET /status.html", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	return b.recoverHTTP(b.limitBody(mux))
}

// limitBody bounds request bodies at maxMessageSize plus the frame
// padding, the largest thing a client may send the broker at all (a
// schema or a REST-produced message); a longer body fails its read with
// 413 from the handler's decode. The server's read timeout
// (cmd/magnetar/httpserve.go) bounds how long a body may take.
func (b *Broker) limitBody(next http.Handler) http.Handler {
	limit := int64(b.cfg.MaxMessageSize + wire.FramePadding)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is larger than %d", r.ContentLength, limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// HTTP server limits, as Pulsar's web server (Jetty) bounds requests: a
// client gets ReadHeaderTimeout for its headers and ReadTimeout for the
// whole request with its body (a body announcing 2^64-1 bytes no longer
// holds a request open for ever), headers up to Pulsar's
// httpMaxRequestHeaderSize (8 KiB) plus a margin for long tokens, and an
// idle keep-alive connection is closed after IdleTimeout. There is no
// write timeout: /debug/pprof/profile and trace answer after the
// duration the caller asks for.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 60 * time.Second
	httpIdleTimeout       = 120 * time.Second
	httpMaxHeaderBytes    = 16 << 10
)

// NewHTTPServer is an http.Server for h with these limits; every
// server's HTTP port (broker, bookie, standalone) is one.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		IdleTimeout: httpIdleTimeout, MaxHeaderBytes: httpMaxHeaderBytes}
}

// topicFromPath rebuilds the topic name of an HTTP path.
func topicFromPath(r *http.Request) (TopicName, error) {
	return ParseTopicName(r.PathValue("domain") + "://" + r.PathValue("tenant") + "/" +
		r.PathValue("namespace") + "/" + r.PathValue("topic"))
}

func (b *Broker) httpLookup(w http.ResponseWriter, r *http.Request) {
	t, err := topicFromPath(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := b.lookup(r.Context(), t, r.URL.Query().Get("authoritative") == "true")
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if res.Redirect {
		redirectTo(w, r, res.HTTPURL, res.Authoritative)
		return
	}
	httpURL := res.HTTPURL
	if res.Self || httpURL == "" {
		httpURL = "http://" + webHost(r, b.advertisedAddress())
	}
	writeJSON(w, map[string]string{"brokerUrl": res.BrokerURL, "httpUrl": httpURL})
}

// redirectTo answers 307 with the same request on another broker, as
// Pulsar does for lookups and admin calls on topics owned elsewhere.
func redirectTo(w http.ResponseWriter, r *http.Request, baseURL string, authoritative bool) {
	q := r.URL.Query()
	q.Set("authoritative", strconv.FormatBool(authoritative))
	w.Header().Set("Location", strings.TrimSuffix(baseURL, "/")+r.URL.Path+"?"+q.Encode())
	w.WriteHeader(http.StatusTemporaryRedirect)
}

// webHost is the host:port the client reached us on for HTTP, falling
// back to the advertised host.
func webHost(r *http.Request, fallback string) string {
	if r.Host != "" {
		return r.Host
	}
	return strings.Split(fallback, ":")[0]
}

func (b *Broker) httpPartitions(w http.ResponseWriter, r *http.Request) {
	t, err := topicFromPath(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	n, err := b.partitions(r.Context(), t)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, map[string]int{"partitions": n})
}

// httpCreatePartitioned is pulsar-admin topics create-partitioned-topic:
// the body is the partition count.
func (b *Broker) httpCreatePartitioned(w http.ResponseWriter, r *http.Request) {
	t, err := topicFromPath(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	n, err := decodePartitionCount(r.Body)
	if err != nil {
		adminError(w, err)
		return
	}
	if err := b.CreatePartitionedTopic(r.Context(), t, n); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, metadata.ErrExists) {
			code = http.StatusConflict
		}
		httpError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, v any) { admin.WriteJSON(w, v) }

// httpError answers in Pulsar's error shape, {"reason": "..."}.
func httpError(w http.ResponseWriter, code int, reason string) { admin.WriteError(w, code, reason) }
