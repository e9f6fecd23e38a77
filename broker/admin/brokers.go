package admin

// Brokers and bundle ownership (Pulsar's /admin/v2/brokers, the load
// report, namespace and bundle unload, bundle split). Without cluster
// mode (no ownership service) they answer for this lone broker, or 412
// where only the ownership service can answer.

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/magnetar-io/magnetar/broker/ownership"
)

func (a *brokerAPI) registerCluster(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/brokers", a.activeBrokers) // the local cluster's (pulsaradmin's GetListActiveBrokers)
	mux.HandleFunc("GET /admin/v2/brokers/{cluster}", a.activeBrokers)
	mux.HandleFunc("GET /admin/v2/brokers/leaderBroker", a.leaderBroker)
	mux.HandleFunc("GET /admin/v2/brokers/health", a.health)
	mux.HandleFunc("GET /admin/v2/brokers/version", func(w http.ResponseWriter, r *http.Request) {
		if ops, ok := a.b.(BrokerOps); ok {
			WriteJSON(w, ops.BrokerVersion())
			return
		}
		a.fail(w, r, Errorf(ErrNotSupported, "brokers version is not supported by this broker"))
	})
	mux.HandleFunc("GET /admin/v2/brokers/backlog-quota-check", func(w http.ResponseWriter, r *http.Request) {
		if ops, ok := a.b.(BrokerOps); ok {
			ops.CheckBacklogQuotas(r.Context())
			w.WriteHeader(http.StatusNoContent)
			return
		}
		a.fail(w, r, Errorf(ErrNotSupported, "brokers backlog-quota-check is not supported by this broker"))
	})
	mux.HandleFunc("GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces", a.ownedNamespaces)
	mux.HandleFunc("GET /admin/v2/broker-stats/load-report", a.loadReport)
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{namespace}/unload", a.unloadNamespace)
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload", a.bundleOp("unload"))
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split", a.bundleOp("split"))
}

// BrokerOps are the brokers group's commands about this broker itself.
type BrokerOps interface {
	// BrokerVersion is the broker's version (pulsar-admin brokers version).
	BrokerVersion() string
	// CheckBacklogQuotas runs the backlog quota check now
	// (brokers backlog-quota-check).
	CheckBacklogQuotas(ctx context.Context)
}

// clusterOnly answers 412 when the broker is not in cluster mode.
func (a *brokerAPI) clusterOnly(w http.ResponseWriter) *ownership.Service {
	svc := a.b.Ownership()
	if svc == nil {
		WriteError(w, http.StatusPreconditionFailed, "this broker does not run bundle ownership (not in cluster mode)")
	}
	return svc
}

func (a *brokerAPI) activeBrokers(w http.ResponseWriter, r *http.Request) {
	if c, own := r.PathValue("cluster"), a.b.ClusterName(); c != "" && c != own {
		WriteError(w, http.StatusNotFound, "cluster "+c+" is not this broker's cluster ("+own+")")
		return
	}
	svc := a.clusterOnly(w)
	if svc == nil {
		return
	}
	brokers, err := svc.Brokers(r.Context())
	if err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	ids := make([]string, 0, len(brokers))
	for id := range brokers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	WriteJSON(w, ids)
}

func (a *brokerAPI) leaderBroker(w http.ResponseWriter, r *http.Request) {
	svc := a.clusterOnly(w)
	if svc == nil {
		return
	}
	li, ok, err := svc.Leader(r.Context())
	if err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if !ok {
		WriteError(w, http.StatusNotFound, "no leader broker is elected")
		return
	}
	WriteJSON(w, li)
}

// health is brokers healthcheck: the broker serves, and (in cluster
// mode) still holds its metadata session.
func (a *brokerAPI) health(w http.ResponseWriter, r *http.Request) {
	if a.b.Closing() {
		WriteError(w, http.StatusServiceUnavailable, "broker is shutting down")
		return
	}
	if svc := a.b.Ownership(); svc != nil {
		if _, err := svc.Brokers(r.Context()); err != nil {
			WriteError(w, http.StatusServiceUnavailable, "metadata store unreachable: "+err.Error())
			return
		}
	}
	_, _ = w.Write([]byte("ok"))
}

func (a *brokerAPI) ownedNamespaces(w http.ResponseWriter, r *http.Request) {
	svc := a.clusterOnly(w)
	if svc == nil {
		return
	}
	if id := r.PathValue("broker"); id != svc.ID() {
		brokers, err := svc.Brokers(r.Context())
		if d, ok := brokers[id]; err == nil && ok {
			redirectTo(w, r, webURLFor(r, d.WebServiceURL, d.WebServiceURLTLS), false)
			return
		}
		WriteError(w, http.StatusNotFound, "broker "+id+" is not registered")
		return
	}
	out := map[string]namespaceOwnership{}
	for _, bundle := range svc.Owned() {
		out[bundle.String()] = namespaceOwnership{BrokerAssignment: "shared", IsActive: true}
	}
	WriteJSON(w, out)
}

func (a *brokerAPI) loadReport(w http.ResponseWriter, _ *http.Request) {
	if svc := a.clusterOnly(w); svc != nil {
		WriteJSON(w, svc.Report())
	}
}

// unloadNamespace unloads every bundle of the namespace on its owner.
func (a *brokerAPI) unloadNamespace(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("tenant") + "/" + r.PathValue("namespace")
	svc := a.b.Ownership()
	if svc == nil {
		a.b.UnloadNamespace(r.Context(), ns)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	bundles, err := svc.Bundles(r.Context(), ns)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	for _, bundle := range bundles {
		if err := svc.UnloadAnywhere(r.Context(), bundle); err != nil {
			WriteError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// bundleOp unloads or splits one bundle: here when this broker owns it,
// else on its owner.
func (a *brokerAPI) bundleOp(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc := a.clusterOnly(w)
		if svc == nil {
			return
		}
		bundle, err := ownership.ParseBundle(r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("bundle"))
		if err != nil {
			WriteError(w, http.StatusBadRequest, err.Error())
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
			WriteError(w, code, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
