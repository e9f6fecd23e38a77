package admin

// The cluster's bookies (Pulsar's BookiesBase):
//
//	GET /admin/v2/bookies/all   every registered bookie, writable and read-only, as Pulsar's
//	                            BookiesClusterInfo: {"bookies": [{"bookieId": "host:port", ...}]}
//
// Beyond Pulsar's bookieId each item says "readOnly" and, for a read-only
// bookie, why ("reason") and whether because a disk is full
// ("outOfSpace": it turns writable by itself once space is freed). Pulsar
// clients ignore the extra fields. The broker reads the registrations
// from the cluster's metadata store; without that store it is 412.

import "net/http"

func (a *brokerAPI) registerBookies(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/bookies/all", func(w http.ResponseWriter, r *http.Request) {
		bookies, err := a.b.Bookies(r.Context())
		a.answer(w, r, BookiesClusterInfo{Bookies: bookies}, err)
	})
}
