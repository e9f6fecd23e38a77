package admin

// Topic-level policies: .../{topic}/replication (GET, POST, DELETE), as
// Pulsar's topic policies and pulsaradmin's Topics().SetReplicationClusters,
// GetReplicationClusters, RemoveReplicationClusters call them.
//
// Behavior:
//   - POST takes the list of clusters; each must exist and be allowed
//     for the namespace (412 otherwise, as for a namespace). An empty list
//     or DELETE removes the setting: the namespace's clusters apply.
//   - GET answers the topic's own list, or with applied=true the list in
//     force (the namespace's when the topic has none).
//   - Answered by any broker: the policies live in the configuration
//     store, which every broker (and cluster of the instance) shares.
//     A partition takes its partitioned topic's setting.

import (
	"context"
	"net/http"
)

// TopicPolicies serves topic-level policies.
type TopicPolicies interface {
	// TopicReplicationClusters is the topic's own list (applied: else
	// its namespace's).
	TopicReplicationClusters(ctx context.Context, name string, applied bool) ([]string, error)
	// SetTopicReplicationClusters sets (empty: removes) the topic's list.
	SetTopicReplicationClusters(ctx context.Context, name string, clusters []string) error
}

func (a *brokerAPI) registerTopicPolicies(tp string, here func(string, topicHandler)) {
	here("GET "+tp+"/replication", func(w http.ResponseWriter, r *http.Request, name string) {
		c, err := a.b.TopicReplicationClusters(r.Context(), name, r.URL.Query().Get("applied") == "true")
		a.answer(w, r, orEmpty(c), err)
	})
	here("POST "+tp+"/replication", func(w http.ResponseWriter, r *http.Request, name string) {
		var clusters []string
		if err := requireBody(w, r, "replication_clusters", &clusters); err != nil {
			a.done(w, r, err)
			return
		}
		a.done(w, r, a.b.SetTopicReplicationClusters(r.Context(), name, clusters))
	})
	here("DELETE "+tp+"/replication", func(w http.ResponseWriter, r *http.Request, name string) {
		a.done(w, r, a.b.SetTopicReplicationClusters(r.Context(), name, nil))
	})
}
