package admin

import (
	"fmt"
	"net/http"
)

// RegisterUnsupported answers every /admin/ request that no route serves
// with 501 naming its method and path. Pulsar's admin API has endpoints
// this broker does not serve (docs/compat/pulsar-admin.md lists them): a
// client must learn that the endpoint is not supported, not that its
// topic or namespace does not exist, which is what a bare 404 says. More
// specific patterns win in http.ServeMux, so every served route, and its
// own 404s, are unchanged.
func RegisterUnsupported(mux *http.ServeMux) {
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		// The caller's own path, not an internal one: written as it is
		// (WriteError would elide it).
		body, _ := encode(errorBody{Reason: fmt.Sprintf("%s %s: this admin endpoint is not supported by this broker "+
			"(docs/compat/pulsar-admin.md lists what is)", r.Method, r.URL.Path)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write(body)
	})
}
