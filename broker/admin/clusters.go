package admin

// Clusters: /admin/v2/clusters.
//
// Behavior, as Pulsar's ClustersBase:
//   - GET lists cluster names, without the "global" pseudo-cluster.
//   - PUT creates (409 if it exists, 400 for a bad name or URL), POST
//     replaces the data of an existing one (404 otherwise), keeping the
//     members this broker does not model that the body does not carry.
//   - DELETE answers 412 while a namespace replicates to the cluster.
//   - /peers reads and replaces peerClusterNames; peers must exist (412).

import (
	"net/http"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func (a *api) registerClusters(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/v2/clusters", a.listClusters)
	mux.HandleFunc("GET /admin/v2/clusters/{cluster}", a.getCluster)
	mux.HandleFunc("PUT /admin/v2/clusters/{cluster}", a.createCluster)
	mux.HandleFunc("POST /admin/v2/clusters/{cluster}", a.updateCluster)
	mux.HandleFunc("DELETE /admin/v2/clusters/{cluster}", a.deleteCluster)
	mux.HandleFunc("GET /admin/v2/clusters/{cluster}/peers", a.getPeerClusters)
	mux.HandleFunc("POST /admin/v2/clusters/{cluster}/peers", a.setPeerClusters)
}

func (a *api) listClusters(w http.ResponseWriter, r *http.Request) {
	names, err := a.res.ListClusters(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, names)
}

func (a *api) getCluster(w http.ResponseWriter, r *http.Request) {
	c, err := a.res.GetCluster(r.Context(), r.PathValue("cluster"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, c)
}

func (a *api) createCluster(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("cluster")
	var c resources.ClusterData
	if err := requireBody(w, r, "cluster data", &c); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.res.CreateCluster(r.Context(), name, c); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("cluster created", "cluster", name)
	done(w)
}

func (a *api) updateCluster(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("cluster")
	var body resources.ClusterData
	if err := requireBody(w, r, "cluster data", &body); err != nil {
		a.fail(w, r, err)
		return
	}
	_, err := a.res.UpdateCluster(r.Context(), name, func(c *resources.ClusterData) error {
		extra := c.Extra
		*c = body
		c.Extra = mergeExtra(extra, body.Extra)
		return nil
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("cluster updated", "cluster", name)
	done(w)
}

func (a *api) deleteCluster(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("cluster")
	if err := a.res.DeleteCluster(r.Context(), name); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("cluster deleted", "cluster", name)
	done(w)
}

func (a *api) getPeerClusters(w http.ResponseWriter, r *http.Request) {
	c, err := a.res.GetCluster(r.Context(), r.PathValue("cluster"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	WriteJSON(w, orEmpty(c.PeerClusterNames))
}

func (a *api) setPeerClusters(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("cluster")
	var peers []string
	if err := requireBody(w, r, "peerClusterNames", &peers); err != nil {
		a.fail(w, r, err)
		return
	}
	if _, err := a.res.SetPeerClusters(r.Context(), name, peers); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("cluster peers set", "cluster", name, "peers", peers)
	done(w)
}

// orEmpty answers [] rather than null for an empty list.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
