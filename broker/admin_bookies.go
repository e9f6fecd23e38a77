package broker

// Admin endpoint about the cluster's bookies (Pulsar's BookiesBase):
//
//	GET /admin/v2/bookies/all   every registered bookie, writable and read-only, as Pulsar's
//	                            BookiesClusterInfo: {"bookies": [{"bookieId": "host:port", ...}]}
//
// Beyond Pulsar's bookieId each item says "readOnly" and, for a read-only
// bookie, why ("reason") and whether because a disk is full
// ("outOfSpace": it turns writable by itself once space is freed). Pulsar
// clients ignore the extra fields. The list is read from the registrations
// under registry.AvailablePath in the cluster's metadata store
// (Config.ClusterMetadata), as the ledger client reads it; without that
// store the endpoint answers 412.

import (
	"net/http"
	"sort"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/broker/admin"
)

func (b *Broker) registerBookiesAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/bookies/all", b.httpAllBookies)
}

// bookiesClusterInfo is Pulsar's BookiesClusterInfo.
type bookiesClusterInfo struct {
	Bookies []bookieInfoJSON `json:"bookies"`
}

// bookieInfoJSON is Pulsar's RawBookieInfo (bookieId) with the bookie's
// mode added.
type bookieInfoJSON struct {
	BookieID   string `json:"bookieId"`
	ReadOnly   bool   `json:"readOnly"`
	Reason     string `json:"reason,omitempty"`
	OutOfSpace bool   `json:"outOfSpace,omitempty"`
}

func (b *Broker) httpAllBookies(w http.ResponseWriter, r *http.Request) {
	store := b.cfg.ClusterMetadata
	if store == nil {
		httpError(w, http.StatusPreconditionFailed, "this broker has no cluster metadata store, so no bookie registry (its topics are not stored on bookies)")
		return
	}
	regs, err := registry.Bookies(r.Context(), store)
	if err != nil {
		status := admin.StatusOf(err)
		if status >= 500 {
			b.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		}
		httpError(w, status, err.Error())
		return
	}
	out := bookiesClusterInfo{Bookies: make([]bookieInfoJSON, 0, len(regs))}
	for _, reg := range regs {
		item := bookieInfoJSON{BookieID: reg.BookieID, ReadOnly: reg.ReadOnly}
		if reg.ReadOnly {
			item.Reason, item.OutOfSpace = reg.ReadOnlyReason, reg.OutOfSpace
		}
		out.Bookies = append(out.Bookies, item)
	}
	sort.Slice(out.Bookies, func(i, j int) bool { return out.Bookies[i].BookieID < out.Bookies[j].BookieID })
	writeJSON(w, out)
}
