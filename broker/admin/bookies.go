package admin

// The cluster's bookies (Pulsar's BookiesBase):
//
//	GET    /admin/v2/bookies/all                      every registered bookie, writable and read-only, as Pulsar's
//	                                                  BookiesClusterInfo: {"bookies": [{"bookieId": "host:port", ...}]}
//	GET    /admin/v2/bookies/racks-info               the rack map: {"group": {"host:port": {"rack": "/region/rack", "hostname": ..}}}
//	GET    /admin/v2/bookies/racks-info/{bookie}      one bookie's {"rack", "hostname"}; 404 if the map does not name it
//	POST   /admin/v2/bookies/racks-info/{bookie}?group=g   set it (body {"rack", "hostname"}; group "default" if absent;
//	                                                  the bookie leaves any other group); 204
//	DELETE /admin/v2/bookies/racks-info/{bookie}      remove it from every group; 404 if not there; 204
//
// Beyond Pulsar's bookieId each item of /all says "readOnly" and, for a
// read-only bookie, why ("reason") and whether because a disk is full
// ("outOfSpace": it turns writable by itself once space is freed). Pulsar
// clients ignore the extra fields. The broker reads the registrations and
// the rack map (node /bookies, as Pulsar) from the cluster's metadata
// store; without that store it is 412. A rack must be a network location
// ("/region/rack" or "/rack": 400 otherwise). Ledger clients watch the map:
// new ledgers are placed by it at once; existing ensembles move only when
// a bookie of theirs fails or the auditor's placement check moves them.

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func (a *brokerAPI) registerBookies(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/bookies/all", func(w http.ResponseWriter, r *http.Request) {
		bookies, err := a.b.Bookies(r.Context())
		a.answer(w, r, BookiesClusterInfo{Bookies: bookies}, err)
	})
	mux.HandleFunc("GET /admin/v2/bookies/racks-info", func(w http.ResponseWriter, r *http.Request) {
		racks, err := a.b.RacksInfo(r.Context())
		if racks == nil {
			racks = BookiesRackConfiguration{}
		}
		a.answer(w, r, racks, err)
	})
	mux.HandleFunc("GET /admin/v2/bookies/racks-info/{bookie}", func(w http.ResponseWriter, r *http.Request) {
		racks, err := a.b.RacksInfo(r.Context())
		if err != nil {
			a.fail(w, r, err)
			return
		}
		bookie := r.PathValue("bookie")
		groups := make([]string, 0, len(racks))
		for g := range racks {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			if info, ok := racks[g][bookie]; ok {
				WriteJSON(w, info)
				return
			}
		}
		a.fail(w, r, Errorf(resources.ErrNotFound, "bookie %s has no rack placement", bookie))
	})
	mux.HandleFunc("POST /admin/v2/bookies/racks-info/{bookie}", func(w http.ResponseWriter, r *http.Request) {
		var info BookieRackInfo
		if err := requireBody(w, r, "rack", &info); err != nil {
			a.fail(w, r, err)
			return
		}
		if err := validRack(info.Rack); err != nil {
			a.fail(w, r, err)
			return
		}
		group := r.URL.Query().Get("group")
		if group == "" {
			group = "default"
		}
		if err := a.b.SetBookieRack(r.Context(), r.PathValue("bookie"), group, info); err != nil {
			a.fail(w, r, err)
			return
		}
		a.log.Info("bookie rack set", "bookie", r.PathValue("bookie"), "group", group, "rack", info.Rack)
		done(w)
	})
	mux.HandleFunc("DELETE /admin/v2/bookies/racks-info/{bookie}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.b.DeleteBookieRack(r.Context(), r.PathValue("bookie")); err != nil {
			a.fail(w, r, err)
			return
		}
		a.log.Info("bookie rack removed", "bookie", r.PathValue("bookie"))
		done(w)
	})
}

// validRack checks a network location: "/region/rack" or "/rack".
func validRack(loc string) error {
	if !strings.HasPrefix(loc, "/") || strings.HasSuffix(loc, "/") || strings.Contains(loc, "//") || len(loc) < 2 {
		return invalid("rack", "want a network location /region/rack or /rack, got "+strconv.Quote(loc))
	}
	return nil
}
