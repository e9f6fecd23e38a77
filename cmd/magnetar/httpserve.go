package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/magnetar-io/magnetar/broker"
)

// addOpsHandlers adds what every server's HTTP port offers operators:
// /metrics (metrics) and /debug/pprof.
func addOpsHandlers(mux *http.ServeMux, metrics http.Handler) {
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// registryHandler serves reg's metrics.
func registryHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// serveHTTP listens on addr and serves mux in the background; what names
// the server in errors and in the one line logged if it stops.
func serveHTTP(addr string, mux *http.ServeMux, what string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	srv := broker.NewHTTPServer(mux)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" stopped; its endpoints (/metrics, pprof) are unavailable", "err", err)
		}
	}()
	return srv, nil
}
