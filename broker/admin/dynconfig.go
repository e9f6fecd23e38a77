package admin

// Dynamic configuration (pulsar-admin brokers update-dynamic-config),
// pulsaradmin's Brokers; the broker (DynamicConfig) keeps the settings,
// their validation and the stored overrides:
//
//	GET    /admin/v2/brokers/configuration                  dynamic keys
//	GET    /admin/v2/brokers/configuration/values           the overrides stored
//	POST   /admin/v2/brokers/configuration/{key}/{value}    set one: 200 (412: not dynamic, or invalid)
//	DELETE /admin/v2/brokers/configuration/{key}            remove one (404: no override)
//	GET    /admin/v2/brokers/configuration/runtime          every setting's value in effect here
//	GET    /admin/v2/brokers/internal-configuration         the metadata stores

import "net/http"

func (a *brokerAPI) registerDynamicConfig(mux *http.ServeMux) {
	const base = "/admin/v2/brokers/configuration"
	mux.HandleFunc("GET "+base, func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, a.b.DynamicKeys()) })
	mux.HandleFunc("GET "+base+"/values", func(w http.ResponseWriter, r *http.Request) {
		overrides, err := a.b.DynamicOverrides(r.Context())
		a.answer(w, r, overrides, err)
	})
	mux.HandleFunc("POST "+base+"/{key}/{value}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.b.SetDynamic(r.Context(), r.PathValue("key"), r.PathValue("value")); err != nil {
			a.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusOK) // Pulsar answers 200 here (Response.ok()), not 204
	})
	mux.HandleFunc("DELETE "+base+"/{key}", func(w http.ResponseWriter, r *http.Request) {
		a.done(w, r, a.b.DeleteDynamic(r.Context(), r.PathValue("key")))
	})
	mux.HandleFunc("GET "+base+"/runtime", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, a.b.RuntimeConfig()) })
	mux.HandleFunc("GET /admin/v2/brokers/internal-configuration", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, a.b.InternalConfig())
	})
}
