// Package console serves Magnetar's web console at /console on every
// broker's (and, forwarded, the proxy's) web port: a single-page app whose
// built assets (dist/, from the source in web/, built by `make console`)
// are embedded in the binary, and the JSON endpoints it reads
// (docs/console-api.md is the contract).
//
// What the console may see and do is decided where the admin API decides
// it: the broker authenticates and authorizes /console/api/* requests with
// the same rules as the REST endpoints behind each view (broker/httpauth.go),
// and /console/api/admin/... is the admin API itself, dispatched into the
// broker's own HTTP handler. Two things the browser cannot do are done
// here:
//   - Follow a redirect to another broker. The admin API answers a call on
//     a topic owned elsewhere with 307 to the owner, which a page served by
//     one broker may not follow to another origin; the console follows it
//     itself, with the caller's Authorization header.
//   - Refuse changes in read-only mode (consoleReadOnly): only GET and HEAD
//     pass through.
//
// Figures that span brokers (the overview, a namespace's topics, a
// partitioned topic's history) are gathered by the broker serving the page
// from every broker's /console/api/local/... endpoints (Source).
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// Source is what the console's JSON endpoints read; the broker implements
// it. Errors carry their HTTP status as admin.StatusOf understands them.
type Source interface {
	// ConsoleSession describes the caller (401 error: log in first; the
	// session's AuthMethods are filled in then too).
	ConsoleSession(r *http.Request) (Session, error)
	// ConsoleOverview gathers the cluster's brokers, bookies, totals and alerts.
	ConsoleOverview(ctx context.Context) (Overview, error)
	// ConsoleSummary is this broker's own part of the overview.
	ConsoleSummary(ctx context.Context) (BrokerSummary, error)
	// ConsoleBookies lists the bookies with their disk usage.
	ConsoleBookies(ctx context.Context) ([]Bookie, error)
	// ConsoleTopics lists a namespace's topics with their figures, from
	// every broker; ConsoleLocalTopics only the topics this broker has
	// loaded.
	ConsoleTopics(ctx context.Context, tenant, namespace string) ([]TopicRow, error)
	ConsoleLocalTopics(ctx context.Context, tenant, namespace string) ([]TopicRow, error)
	// ConsoleHistory is a topic's samples wherever it is served; ConsoleLocalHistory
	// only this broker's (ok false: not loaded here).
	ConsoleHistory(ctx context.Context, topic string) (History, error)
	ConsoleLocalHistory(topic string) (History, bool)
}

// Config configures the console handler.
type Config struct {
	Source Source
	// ReadOnly refuses every admin call but GET and HEAD.
	ReadOnly bool
	// Admin is the broker's whole HTTP handler (authentication and
	// authorization included): /console/api/admin/X is served as /admin/X.
	Admin http.Handler
	// Redirects is the client that follows the admin API's redirects to
	// other brokers (the brokers' TLS settings).
	Redirects *http.Client
	// StatusOf maps an error to its HTTP status.
	StatusOf func(error) int
	Logger   *slog.Logger
}

// ReadOnlyReason is the refusal of a change in read-only mode.
const ReadOnlyReason = "the console is read-only (consoleReadOnly)"

// Handler serves /console/ (assets and the SPA's entry point) and
// /console/api/*.
func Handler(cfg Config) http.Handler {
	assets, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("console: embedded dist missing: " + err.Error()) // a build defect, not a runtime condition
	}
	h := &handler{cfg: cfg, assets: assets}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/api/session", h.session)
	mux.HandleFunc("GET /console/api/overview", h.answer(func(r *http.Request) (any, error) { return cfg.Source.ConsoleOverview(r.Context()) }))
	mux.HandleFunc("GET /console/api/bookies", h.answer(func(r *http.Request) (any, error) { return cfg.Source.ConsoleBookies(r.Context()) }))
	mux.HandleFunc("GET /console/api/local/summary", h.answer(func(r *http.Request) (any, error) { return cfg.Source.ConsoleSummary(r.Context()) }))
	mux.HandleFunc("GET /console/api/namespaces/{tenant}/{namespace}/topics", h.answer(func(r *http.Request) (any, error) {
		return cfg.Source.ConsoleTopics(r.Context(), r.PathValue("tenant"), r.PathValue("namespace"))
	}))
	mux.HandleFunc("GET /console/api/local/namespaces/{tenant}/{namespace}/topics", h.answer(func(r *http.Request) (any, error) {
		return cfg.Source.ConsoleLocalTopics(r.Context(), r.PathValue("tenant"), r.PathValue("namespace"))
	}))
	mux.HandleFunc("GET /console/api/history/{domain}/{tenant}/{namespace}/{topic}", h.answer(func(r *http.Request) (any, error) {
		return cfg.Source.ConsoleHistory(r.Context(), topicOf(r))
	}))
	mux.HandleFunc("GET /console/api/local/history/{domain}/{tenant}/{namespace}/{topic}", h.answer(func(r *http.Request) (any, error) {
		hist, ok := cfg.Source.ConsoleLocalHistory(topicOf(r))
		if !ok {
			return nil, errNotLoadedHere
		}
		return hist, nil
	}))
	mux.HandleFunc("/console/api/admin/", h.admin)
	mux.HandleFunc("/console/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no console endpoint "+r.Method+" "+r.URL.Path)
	})
	mux.HandleFunc("/console/", h.static)
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
	})
	return mux
}

// errNotLoadedHere answers a local history request for a topic this
// broker does not serve.
var errNotLoadedHere = &statusError{status: http.StatusNotFound, reason: "topic is not loaded on this broker"}

type statusError struct {
	status int
	reason string
}

func (e *statusError) Error() string { return e.reason }

type handler struct {
	cfg    Config
	assets fs.FS
}

func topicOf(r *http.Request) string {
	return r.PathValue("domain") + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic")
}

// session answers who the caller is; refused, it still names the
// enabled methods, so that the login page offers only those.
func (h *handler) session(w http.ResponseWriter, r *http.Request) {
	s, err := h.cfg.Source.ConsoleSession(r)
	if err != nil {
		status := http.StatusUnauthorized
		if h.cfg.StatusOf != nil {
			status = h.cfg.StatusOf(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"reason": err.Error(), "authMethods": s.AuthMethods})
		return
	}
	s.ReadOnly = h.cfg.ReadOnly
	writeJSON(w, s)
}

// answer serves fn's value as JSON, or its error with its status.
func (h *handler) answer(fn func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, v)
	}
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var se *statusError
	switch {
	case errors.As(err, &se):
		status = se.status
	case h.cfg.StatusOf != nil:
		status = h.cfg.StatusOf(err)
	}
	if status >= 500 && h.cfg.Logger != nil {
		h.cfg.Logger.Error("console request failed", "path", r.URL.Path, "status", status, "err", err)
	}
	writeError(w, status, err.Error())
}

// static serves an asset, or index.html for any other path under
// /console/ (the SPA routes by the URL's fragment, but a reload of a deep
// link must still land on the app). index.html is never cached, so a new
// binary's assets (hashed names) are picked up at the next load.
func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "the console's pages are read with GET")
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/console")
	name = strings.TrimPrefix(name, "/")
	if name != "" && name != "index.html" {
		if f, err := h.assets.Open(name); err == nil {
			st, statErr := f.Stat()
			_ = f.Close()
			if statErr == nil && !st.IsDir() {
				if strings.HasPrefix(name, "assets/") {
					w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
				}
				http.ServeFileFS(w, r, h.assets, name)
				return
			}
		}
		if strings.HasPrefix(name, "assets/") {
			writeError(w, http.StatusNotFound, "no console asset "+name)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-cache")
	index, err := fs.ReadFile(h.assets, "index.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "console assets are missing from this build (make console)")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(index)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in Pulsar's error shape, {"reason": "..."}.
func writeError(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"reason": reason})
}
