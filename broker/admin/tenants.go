package admin

// Tenants: /admin/v2/tenants.
//
// Behavior, as Pulsar's TenantsBase:
//   - GET lists tenant names, sorted.
//   - PUT creates (409 if it exists); allowedClusters must be non-empty
//     and exist (412). POST replaces adminRoles and allowedClusters of an
//     existing tenant (404 otherwise); dropping a cluster a namespace
//     replicates to is 412.
//   - DELETE answers 409 "still has namespaces" while any remain.
//     ?force=true is 405, as Pulsar with forceDeleteTenantAllowed=false
//     (its default): deleting namespaces' topics is the broker's job.

import (
	"errors"
	"net/http"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func (a *api) registerTenants(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/tenants", a.listTenants)
	mux.HandleFunc("GET /admin/v2/tenants/{tenant}", a.getTenant)
	mux.HandleFunc("PUT /admin/v2/tenants/{tenant}", a.createTenant)
	mux.HandleFunc("POST /admin/v2/tenants/{tenant}", a.updateTenant)
	mux.HandleFunc("DELETE /admin/v2/tenants/{tenant}", a.deleteTenant)
}

func (a *api) listTenants(w http.ResponseWriter, r *http.Request) {
	names, err := a.res.ListTenants(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, names)
}

func (a *api) getTenant(w http.ResponseWriter, r *http.Request) {
	t, err := a.res.GetTenant(r.Context(), r.PathValue("tenant"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, t)
}

func (a *api) createTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	var t resources.TenantInfo
	// No body is a tenant without clusters, which CreateTenant refuses.
	if err := decodeBody(w, r, "tenant info", &t); err != nil && !errors.Is(err, errNoBody) {
		a.fail(w, r, err)
		return
	}
	if err := a.res.CreateTenant(r.Context(), name, t); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("tenant created", "tenant", name)
	done(w)
}

func (a *api) updateTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	var body resources.TenantInfo
	if err := requireBody(w, r, "tenant info", &body); err != nil {
		a.fail(w, r, err)
		return
	}
	_, err := a.res.UpdateTenant(r.Context(), name, func(t *resources.TenantInfo) error {
		extra := t.Extra
		*t = body
		t.Extra = mergeExtra(extra, body.Extra)
		return nil
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("tenant updated", "tenant", name)
	done(w)
}

func (a *api) deleteTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	if r.URL.Query().Get("force") == "true" {
		WriteError(w, http.StatusMethodNotAllowed, "Broker doesn't allow forced deletion of tenants")
		return
	}
	if err := a.res.DeleteTenant(r.Context(), name); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("tenant deleted", "tenant", name)
	done(w)
}
