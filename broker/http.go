package broker

import (
	"fmt"
	"net/http"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/wire"
)

// HTTPHandler serves the broker's HTTP port: the admin REST API and
// topic lookup (package broker/admin, with the broker behind its
// interfaces; schemas in broker/schema) and /status.html, with request
// bodies bounded, handler panics recovered, and every request
// authenticated and authorized when security is on (httpauth.go).
func (b *Broker) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	admin.RegisterBroker(mux, b, b.log)
	if b.cfg.Schemas != nil {
		b.cfg.Schemas.Register(mux)
	}
	if b.cfg.Resources != nil {
		admin.Register(mux, admin.Config{Resources: b.cfg.Resources, Namespaces: b,
			ClusterName: b.cfg.ClusterName, Logger: b.log})
	}
	mux.HandleFunc("GET /status.html", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	admin.RegisterUnsupported(mux)
	var root http.Handler
	if !b.cfg.ConsoleDisabled {
		// The console's admin passthrough dispatches into the whole
		// chain, so its calls are authorized as direct ones.
		c := b.consoleHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { root.ServeHTTP(w, r) }))
		mux.Handle("/console/", c)
		mux.Handle("GET /console", c)
	}
	root = b.recoverHTTP(v1Rewrite(b.limitBody(b.authHTTP(mux))))
	return root
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

// httpError answers in Pulsar's error shape, {"reason": "..."}.
func httpError(w http.ResponseWriter, code int, reason string) { admin.WriteError(w, code, reason) }
