package broker

// Admin endpoints about brokers and bundle ownership (Pulsar's
// /admin/v2/brokers, broker-stats, namespace and topic unload, bundle
// split). Without cluster mode they answer for this lone broker.

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/magnetar-io/magnetar/broker/ownership"
)

func (b *Broker) registerClusterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/brokers/{cluster}", b.httpActiveBrokers)
	mux.HandleFunc("GET /admin/v2/brokers/leaderBroker", b.httpLeaderBroker)
	mux.HandleFunc("GET /admin/v2/brokers/health", b.httpHealth)
	mux.HandleFunc("GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces", b.httpOwnedNamespaces)
	mux.HandleFunc("GET /admin/v2/broker-stats/load-report", b.httpLoadReport)
	b.registerBrokerStatsAdmin(mux)
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{namespace}/unload", b.httpUnloadNamespace)
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload", b.httpBundleOp("unload"))
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split", b.httpBundleOp("split"))
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload", b.httpUnloadTopic)
}

// clusterOnly answers 412 when the broker is not in cluster mode.
func (b *Broker) clusterOnly(w http.ResponseWriter) *ownership.Service {
	svc := b.own.Load()
	if svc == nil {
		httpError(w, http.StatusPreconditionFailed, "this broker does not run bundle ownership (not in cluster mode)")
	}
	return svc
}

func (b *Broker) httpActiveBrokers(w http.ResponseWriter, r *http.Request) {
	if c := r.PathValue("cluster"); c != b.cfg.ClusterName {
		httpError(w, http.StatusNotFound, "cluster "+c+" is not this broker's cluster ("+b.cfg.ClusterName+")")
		return
	}
	svc := b.clusterOnly(w)
	if svc == nil {
		return
	}
	brokers, err := svc.Brokers(r.Context())
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	ids := make([]string, 0, len(brokers))
	for id := range brokers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	writeJSON(w, ids)
}

func (b *Broker) httpLeaderBroker(w http.ResponseWriter, r *http.Request) {
	svc := b.clusterOnly(w)
	if svc == nil {
		return
	}
	li, ok, err := svc.Leader(r.Context())
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !ok {
		httpError(w, http.StatusNotFound, "no leader broker is elected")
		return
	}
	writeJSON(w, li)
}

// httpHealth is brokers healthcheck: the broker serves, and (in cluster
// mode) still holds its metadata session.
func (b *Broker) httpHealth(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		httpError(w, http.StatusServiceUnavailable, "broker is shutting down")
		return
	}
	if svc := b.own.Load(); svc != nil {
		if _, err := svc.Brokers(r.Context()); err != nil {
			httpError(w, http.StatusServiceUnavailable, "metadata store unreachable: "+err.Error())
			return
		}
	}
	_, _ = w.Write([]byte("ok"))
}

// namespaceOwnership is Pulsar's NamespaceOwnershipStatus.
type namespaceOwnership struct {
	BrokerAssignment string `json:"broker_assignment"`
	IsControlled     bool   `json:"is_controlled"`
	IsActive         bool   `json:"is_active"`
}

func (b *Broker) httpOwnedNamespaces(w http.ResponseWriter, r *http.Request) {
	svc := b.clusterOnly(w)
	if svc == nil {
		return
	}
	if id := r.PathValue("broker"); id != svc.ID() {
		brokers, err := svc.Brokers(r.Context())
		if d, ok := brokers[id]; err == nil && ok {
			redirectTo(w, r, d.WebServiceURL, false)
			return
		}
		httpError(w, http.StatusNotFound, "broker "+id+" is not registered")
		return
	}
	out := map[string]namespaceOwnership{}
	for _, bundle := range svc.Owned() {
		out[bundle.String()] = namespaceOwnership{BrokerAssignment: "shared", IsActive: true}
	}
	writeJSON(w, out)
}

func (b *Broker) httpLoadReport(w http.ResponseWriter, _ *http.Request) {
	if svc := b.clusterOnly(w); svc != nil {
		writeJSON(w, svc.Report())
	}
}

// httpUnloadNamespace unloads every bundle of the namespace on its owner.
func (b *Broker) httpUnloadNamespace(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("tenant") + "/" + r.PathValue("namespace")
	svc := b.own.Load()
	if svc == nil {
		b.unloadWhere(r.Context(), func(t *topic) bool { return namespaceOf(t.name) == ns })
		w.WriteHeader(http.StatusNoContent)
		return
	}
	bundles, err := svc.Bundles(r.Context(), ns)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	for _, bundle := range bundles {
		if err := svc.UnloadAnywhere(r.Context(), bundle); err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// httpBundleOp unloads or splits one bundle: here when this broker owns
// it, else on its owner.
func (b *Broker) httpBundleOp(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc := b.clusterOnly(w)
		if svc == nil {
			return
		}
		bundle, err := ownership.ParseBundle(r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("bundle"))
		if err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		if op == "split" {
			err = svc.SplitAnywhere(r.Context(), bundle)
		} else {
			err = svc.UnloadAnywhere(r.Context(), bundle)
		}
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, ownership.ErrNotOwned) || errors.Is(err, ownership.ErrUnknownBundle) {
				code = http.StatusPreconditionFailed
			}
			httpError(w, code, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// httpUnloadTopic closes one topic here (its clients reconnect and it
// loads again); for a topic owned elsewhere the request is redirected.
func (b *Broker) httpUnloadTopic(w http.ResponseWriter, r *http.Request) {
	t, err := topicFromPath(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	if res, err := b.lookup(r.Context(), t, r.URL.Query().Get("authoritative") == "true"); err != nil {
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	} else if !res.Self {
		redirectTo(w, r, res.HTTPURL, true)
		return
	}
	key := t.String()
	b.unloadWhere(r.Context(), func(x *topic) bool { return x.name.String() == key })
	w.WriteHeader(http.StatusNoContent)
}

// unloadWhere closes the loaded topics that match and says how many.
func (b *Broker) unloadWhere(ctx context.Context, match func(*topic) bool) int {
	var closing []*topic
	b.mu.Lock()
	for key, t := range b.topics {
		if match(t) {
			closing = append(closing, t)
			delete(b.topics, key)
		}
	}
	b.mu.Unlock()
	for _, t := range closing {
		t.close(ctx)
	}
	return len(closing)
}
