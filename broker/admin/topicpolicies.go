package admin

// Topic-level policies: .../{topic}/replication,
// .../{topic}/replicatorDispatchRate and the policies of TopicPolicyNames
// (messageTTL, retention, maxProducers, maxConsumers,
// maxConsumersPerSubscription, maxUnackedMessagesOnConsumer,
// maxUnackedMessagesOnSubscription, maxSubscriptionsPerTopic,
// maxMessageSize, deduplicationEnabled, autoSubscriptionCreation,
// dispatchRate, subscriptionDispatchRate, deduplicationSnapshotInterval,
// persistence, schemaValidationEnforced, publishRate, subscribeRate,
// schemaCompatibilityStrategy, delayedDelivery, compactionThreshold,
// offloadPolicies), each GET, POST (PUT too for
// schemaCompatibilityStrategy), DELETE, as Pulsar's topic policies and
// pulsaradmin's Topics() and TopicPolicies() call them.
//
// Behavior:
//   - The policies of TopicPolicyNames: POST takes the value as the body
//     (messageTTL also as ?messageTTL=); a bad value is 400. GET answers
//     the topic's own value in the scope asked (local to this cluster, or
//     with isGlobal=true the one for every cluster), 204 when it has
//     none; with applied=true the value in force: the topic's (local,
//     else global), else the namespace's, else the broker's. DELETE (or a
//     JSON null) removes the topic's own. The broker enforces each
//     (broker/topicpolicies.go).
//   - Pulsar's other topic policies (inactiveTopicPolicies, ...)
//     answer 501 naming what is not supported, on every method.
//   - POST takes the list of clusters; each must exist and be allowed
//     for the namespace (412 otherwise, as for a namespace). An empty list
//     or DELETE removes the setting: the namespace's clusters apply.
//   - GET answers the topic's own list, or with applied=true the list in
//     force (the namespace's when the topic has none).
//   - replicatorDispatchRate takes Pulsar's DispatchRate body (members
//     left out: no limit, a 1 s period). As a Pulsar topic policy it is
//     local, for the replicators of the cluster of the broker asked,
//     unless isGlobal=true, which sets the one for every cluster without
//     its own. GET answers nothing (204) when the topic has none, or with
//     applied=true the rate in force here: the topic's, else the
//     namespace's for this cluster, else the broker's.
//   - permissions (GET), permissions/{role} (POST the actions, DELETE)
//     are the topic's grants, stored in the namespace's
//     auth_policies.destination_auth as Pulsar keeps them; GET answers the
//     namespace's grants merged with the topic's. Revoking a role with no
//     topic-level grant is 412. All of them need the tenant's admin.
//   - Answered by any broker: the policies live in the configuration
//     store, which every broker (and cluster of the instance) shares.
//     A partition takes its partitioned topic's setting.

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// TopicPolicies serves topic-level policies.
type TopicPolicies interface {
	// TopicReplicationClusters is the topic's own list (applied: else
	// its namespace's).
	TopicReplicationClusters(ctx context.Context, name string, applied bool) ([]string, error)
	// SetTopicReplicationClusters sets (empty: removes) the topic's list.
	SetTopicReplicationClusters(ctx context.Context, name string, clusters []string) error
	// TopicReplicatorDispatchRate is the topic's own replicator dispatch
	// rate, nil when it has none (applied: else the one in force).
	// global: the one set for every cluster.
	TopicReplicatorDispatchRate(ctx context.Context, name string, global, applied bool) (*resources.DispatchRate, error)
	// SetTopicReplicatorDispatchRate sets (nil: removes) it.
	SetTopicReplicatorDispatchRate(ctx context.Context, name string, global bool, rate *resources.DispatchRate) error
	// TopicPermissions is who may act on the topic: the namespace's
	// grants with the topic's own over them.
	TopicPermissions(ctx context.Context, name string) (map[string][]resources.AuthAction, error)
	// GrantTopicPermission gives role actions on the topic.
	GrantTopicPermission(ctx context.Context, name, role string, actions []resources.AuthAction) error
	// RevokeTopicPermission removes role's topic-level grant
	// (resources.ErrPrecondition when it has none).
	RevokeTopicPermission(ctx context.Context, name, role string) error
	// TopicPolicy is the topic-level policy called policy (one of
	// TopicPolicyNames): the topic's own value in the scope asked
	// (global: isGlobal), nil when it has none, or with applied the value
	// in force (the topic's, else its namespace's, else the broker's).
	TopicPolicy(ctx context.Context, name, policy string, global, applied bool) (any, error)
	// SetTopicPolicy validates and sets value (JSON; nil removes it).
	SetTopicPolicy(ctx context.Context, name, policy string, global bool, value json.RawMessage) error
}

// TopicPolicyNames are the topic-level policies served by TopicPolicy
// and SetTopicPolicy under .../{topic}/{policy}, with the query parameter
// a POST may carry the value in instead of a body (messageTTL's, as
// pulsaradmin sends it).
var TopicPolicyNames = map[string]string{
	"messageTTL": "messageTTL", "retention": "", "maxProducers": "", "maxConsumers": "",
	"maxConsumersPerSubscription": "", "maxUnackedMessagesOnConsumer": "", "maxUnackedMessagesOnSubscription": "",
	"maxSubscriptionsPerTopic": "", "maxMessageSize": "", "deduplicationEnabled": "", "autoSubscriptionCreation": "",
	"dispatchRate": "", "subscriptionDispatchRate": "", "deduplicationSnapshotInterval": "", "persistence": "",
	"schemaValidationEnforced": "", "publishRate": "", "subscribeRate": "", "schemaCompatibilityStrategy": "", "delayedDelivery": "",
	"compactionThreshold": "", "offloadPolicies": "",
}

// putTopicPolicies are set with PUT as well as POST (Pulsar's route for
// them is a PUT).
var putTopicPolicies = map[string]bool{"schemaCompatibilityStrategy": true}

// unsupportedTopicPolicies are Pulsar's other topic-level policies: each
// route answers 501 naming what is not there, not a bare 404.
var unsupportedTopicPolicies = map[string]string{
	"inactiveTopicPolicies": "inactive topic deletion",
	"backlogQuotaMap":       "per-topic backlog quotas",
	"backlogQuota":          "per-topic backlog quotas",
}

func (a *brokerAPI) registerTopicPolicies(tp string, here func(string, topicHandler)) {
	for policy, query := range TopicPolicyNames {
		a.registerTopicPolicy(tp, here, policy, query)
	}
	for policy, what := range unsupportedTopicPolicies {
		refuse := func(w http.ResponseWriter, r *http.Request, _ string) {
			a.fail(w, r, Errorf(ErrNotSupported, "topic policy %s: %s is not supported by this broker", policy, what))
		}
		for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
			here(method+" "+tp+"/"+policy, refuse)
		}
	}
	here("GET "+tp+"/permissions", func(w http.ResponseWriter, r *http.Request, name string) {
		p, err := a.b.TopicPermissions(r.Context(), name)
		a.answer(w, r, p, err)
	})
	here("POST "+tp+"/permissions/{role}", func(w http.ResponseWriter, r *http.Request, name string) {
		var actions []resources.AuthAction
		if err := requireBody(w, r, "actions", &actions); err != nil {
			a.done(w, r, err)
			return
		}
		a.done(w, r, a.b.GrantTopicPermission(r.Context(), name, r.PathValue("role"), orEmpty(actions)))
	})
	here("DELETE "+tp+"/permissions/{role}", func(w http.ResponseWriter, r *http.Request, name string) {
		a.done(w, r, a.b.RevokeTopicPermission(r.Context(), name, r.PathValue("role")))
	})
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
	here("GET "+tp+"/replicatorDispatchRate", func(w http.ResponseWriter, r *http.Request, name string) {
		rate, err := a.b.TopicReplicatorDispatchRate(r.Context(), name, isGlobal(r), r.URL.Query().Get("applied") == "true")
		if err == nil && rate == nil {
			w.WriteHeader(http.StatusNoContent) // unset, as Pulsar answers it
			return
		}
		a.answer(w, r, rate, err)
	})
	here("POST "+tp+"/replicatorDispatchRate", func(w http.ResponseWriter, r *http.Request, name string) {
		var rate resources.DispatchRate
		if err := requireBody(w, r, "replicatorDispatchRate", &rate); err != nil {
			a.done(w, r, err)
			return
		}
		a.done(w, r, a.b.SetTopicReplicatorDispatchRate(r.Context(), name, isGlobal(r), &rate))
	})
	here("DELETE "+tp+"/replicatorDispatchRate", func(w http.ResponseWriter, r *http.Request, name string) {
		a.done(w, r, a.b.SetTopicReplicatorDispatchRate(r.Context(), name, isGlobal(r), nil))
	})
}

// registerTopicPolicy serves one of TopicPolicyNames: GET (204 when the
// topic has none), POST (the value as the body, or in query), DELETE.
func (a *brokerAPI) registerTopicPolicy(tp string, here func(string, topicHandler), policy, query string) {
	here("GET "+tp+"/"+policy, func(w http.ResponseWriter, r *http.Request, name string) {
		v, err := a.b.TopicPolicy(r.Context(), name, policy, isGlobal(r), r.URL.Query().Get("applied") == "true")
		if err == nil && v == nil {
			w.WriteHeader(http.StatusNoContent) // unset, as Pulsar answers it
			return
		}
		a.answer(w, r, v, err)
	})
	set := func(w http.ResponseWriter, r *http.Request, name string) {
		var value json.RawMessage
		if q := r.URL.Query().Get(query); query != "" && q != "" {
			value = json.RawMessage(q)
		} else if err := requireBody(w, r, policy, &value); err != nil {
			a.done(w, r, err)
			return
		}
		a.done(w, r, a.b.SetTopicPolicy(r.Context(), name, policy, isGlobal(r), value))
	}
	here("POST "+tp+"/"+policy, set)
	if putTopicPolicies[policy] {
		here("PUT "+tp+"/"+policy, set)
	}
	here("DELETE "+tp+"/"+policy, func(w http.ResponseWriter, r *http.Request, name string) {
		a.done(w, r, a.b.SetTopicPolicy(r.Context(), name, policy, isGlobal(r), nil))
	})
}

// isGlobal is Pulsar's isGlobal query parameter of topic policies.
func isGlobal(r *http.Request) bool { return r.URL.Query().Get("isGlobal") == "true" }
