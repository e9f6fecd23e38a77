package admin

// Namespace policies: /admin/v2/namespaces/{tenant}/{namespace}/<policy>.
//
// Behavior, as Pulsar's Namespaces v2 resource:
//   - GET answers the value, or 204 No Content when it is not set (Pulsar
//     answers null; pulsaradmin then keeps its own "unset" value, e.g. -1).
//   - POST (PUT for schemaCompatibilityStrategy) sets it from a JSON body:
//     a number, a boolean, a string, a list or an object, as pulsaradmin
//     sends them. DELETE unsets it. Both answer 204.
//   - Every change is a compare-and-set read-modify-write of the whole
//     policies, validated as a whole: 400 names the field at fault.
//   - autoSubscriptionCreation takes {"allowAutoSubscriptionCreation":
//     bool}, the namespace's override of the broker setting of that name.
//   - backlogQuota takes ?backlogQuotaType=destination_storage (default)
//     or message_age; backlogQuotaMap answers all quotas.
//   - permissions/{role} takes the role's list of actions;
//     permissions/subscription/{sub} takes roles, added to those that may
//     consume the subscription (subscription_auth_roles; none listed: any
//     role with consume), permissions/{sub}/{role} removes one (412 if it
//     was not there), GET permissions/subscription answers them all; replication
//     checks the clusters exist and the tenant allows them (403), and
//     refuses an empty list or "global" (412).
//   - properties: PUT merges a JSON object of labels into the
//     namespace's, GET answers them ({} when none), DELETE removes all.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger/offload"
)

func (a *api) registerPolicies(mux *http.ServeMux) {
	const ns = "/admin/v2/namespaces/{tenant}/{namespace}/"
	a.registerSimplePolicies(mux, ns)
	for policy, what := range unsupportedNamespacePolicies {
		refuse := func(w http.ResponseWriter, r *http.Request) {
			a.fail(w, r, Errorf(ErrNotSupported, "namespace policy %s: %s is not supported by this broker", policy, what))
		}
		for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
			mux.HandleFunc(method+" "+ns+policy, refuse)
		}
	}
	mux.HandleFunc("GET "+ns+"backlogQuotaMap", a.getter(func(p *resources.Policies) any { return orEmptyMap(p.BacklogQuotaMap) }))
	mux.HandleFunc("POST "+ns+"backlogQuota", a.setBacklogQuota)
	mux.HandleFunc("DELETE "+ns+"backlogQuota", a.removeBacklogQuota)
	mux.HandleFunc("GET "+ns+"replication", a.getter(func(p *resources.Policies) any { return orEmpty(p.ReplicationClusters) }))
	mux.HandleFunc("POST "+ns+"replication", a.setReplication)
	mux.HandleFunc("GET "+ns+"permissions", a.getter(func(p *resources.Policies) any { return orEmptyMap(p.AuthPolicies.NamespaceAuth) }))
	mux.HandleFunc("POST "+ns+"permissions/{role}", a.grantPermission)
	mux.HandleFunc("DELETE "+ns+"permissions/{role}", a.updater(func(r *http.Request, p *resources.Policies) error {
		delete(p.AuthPolicies.NamespaceAuth, r.PathValue("role"))
		return nil
	}))
	mux.HandleFunc("GET "+ns+"permissions/subscription", a.getter(func(p *resources.Policies) any {
		return orEmptyMap(p.AuthPolicies.SubscriptionAuthRoles)
	}))
	mux.HandleFunc("POST "+ns+"permissions/subscription/{subscription}", a.grantSubscriptionPermission)
	mux.HandleFunc("DELETE "+ns+"permissions/{subscription}/{role}", a.updater(func(r *http.Request, p *resources.Policies) error {
		sub, role := r.PathValue("subscription"), r.PathValue("role")
		roles := p.AuthPolicies.SubscriptionAuthRoles[sub]
		if !slices.Contains(roles, role) {
			return Errorf(resources.ErrPrecondition, "role %s has no permission on subscription %s", role, sub)
		}
		if roles = slices.DeleteFunc(slices.Clone(roles), func(r string) bool { return r == role }); len(roles) == 0 {
			delete(p.AuthPolicies.SubscriptionAuthRoles, sub)
		} else {
			p.AuthPolicies.SubscriptionAuthRoles[sub] = roles
		}
		return nil
	}))
	mux.HandleFunc("GET "+ns+"delayedDelivery", a.getter(func(p *resources.Policies) any {
		if p.DelayedDeliveryPolicies == nil {
			return nil
		}
		return *p.DelayedDeliveryPolicies
	}))
	mux.HandleFunc("POST "+ns+"delayedDelivery", setter(a, "delayed_delivery_policies", func(p *resources.Policies, v resources.DelayedDeliveryPolicies) {
		p.DelayedDeliveryPolicies = &v
	}))
	mux.HandleFunc("DELETE "+ns+"delayedDelivery", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.DelayedDeliveryPolicies = nil
		return nil
	}))
	mux.HandleFunc("GET "+ns+"schemaValidationEnforced", a.getter(func(p *resources.Policies) any { return p.SchemaValidationEnforced }))
	mux.HandleFunc("POST "+ns+"schemaValidationEnforced", setter(a, "schema_validation_enforced", func(p *resources.Policies, v bool) {
		p.SchemaValidationEnforced = v
	}))
	mux.HandleFunc("GET "+ns+"schemaCompatibilityStrategy", a.getter(func(p *resources.Policies) any {
		return p.EffectiveSchemaCompatibilityStrategy()
	}))
	mux.HandleFunc("PUT "+ns+"schemaCompatibilityStrategy", setter(a, "schema_compatibility_strategy", func(p *resources.Policies, s string) {
		p.SchemaCompatibilityStrategy = s
	}))
}

// clusterKeyedRoutes serves GET, POST and DELETE of a value kept per
// cluster in the namespace's policies, this broker's cluster's.
func clusterKeyedRoutes[T any](a *api, mux *http.ServeMux, ns, path string, values func(*resources.Policies) *map[string]T) {
	mux.HandleFunc("GET "+ns+path, a.getter(func(p *resources.Policies) any {
		if r, ok := (*values(p))[a.cluster]; ok {
			return r
		}
		return nil
	}))
	mux.HandleFunc("POST "+ns+path, setter(a, path, func(p *resources.Policies, v T) {
		m := values(p)
		if *m == nil {
			*m = map[string]T{}
		}
		(*m)[a.cluster] = v
	}))
	mux.HandleFunc("DELETE "+ns+path, a.updater(func(_ *http.Request, p *resources.Policies) error {
		delete(*values(p), a.cluster)
		return nil
	}))
}

// unsupportedNamespacePolicies are Pulsar's namespace policies this
// broker does not enforce: each route answers 501 naming what is not
// there, rather than storing a setting nothing would apply.
var unsupportedNamespacePolicies = map[string]string{
	"inactiveTopicPolicies":                 "inactive topic deletion",
	"schemaAutoUpdateCompatibilityStrategy": "the legacy schema auto-update strategy (use schemaCompatibilityStrategy)",
	"encryptionRequired":                    "refusing unencrypted messages",
	"subscriptionAuthMode":                  "subscription authorization modes",
}

// registerSimplePolicies wires the policies that are one optional value:
// GET, set with POST, and (where Pulsar has it) unset with DELETE.
func (a *api) registerSimplePolicies(mux *http.ServeMux, ns string) {
	optInt := func(path, field string, ref func(*resources.Policies) **int) {
		mux.HandleFunc("GET "+ns+path, a.getter(func(p *resources.Policies) any { return opt(*ref(p)) }))
		mux.HandleFunc("POST "+ns+path, setter(a, field, func(p *resources.Policies, v int) { *ref(p) = &v }))
		mux.HandleFunc("DELETE "+ns+path, a.updater(func(_ *http.Request, p *resources.Policies) error { *ref(p) = nil; return nil }))
	}
	optInt("messageTTL", "message_ttl_in_seconds", func(p *resources.Policies) **int { return &p.MessageTTLInSeconds })
	a.registerOffloadPolicies(mux, ns)
	// compactionThreshold is set with PUT (Pulsar's route), POST too.
	mux.HandleFunc("GET "+ns+"compactionThreshold", a.getter(func(p *resources.Policies) any { return opt(p.CompactionThreshold) }))
	for _, method := range []string{"PUT", "POST"} {
		mux.HandleFunc(method+" "+ns+"compactionThreshold", func(w http.ResponseWriter, r *http.Request) {
			var v int64
			if err := requireBody(w, r, "compaction_threshold", &v); err != nil {
				a.fail(w, r, err)
				return
			}
			if v < 0 {
				a.fail(w, r, Errorf(resources.ErrPrecondition, "compactionThreshold must be 0 or more"))
				return
			}
			a.update(w, r, func(p *resources.Policies) error { p.CompactionThreshold = &v; return nil })
		})
	}
	mux.HandleFunc("DELETE "+ns+"compactionThreshold", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.CompactionThreshold = nil
		return nil
	}))
	optInt("subscriptionExpirationTime", "subscription_expiration_time_minutes",
		func(p *resources.Policies) **int { return &p.SubscriptionExpirationTimeMinutes })
	optInt("maxProducersPerTopic", "max_producers_per_topic", func(p *resources.Policies) **int { return &p.MaxProducersPerTopic })
	optInt("maxConsumersPerTopic", "max_consumers_per_topic", func(p *resources.Policies) **int { return &p.MaxConsumersPerTopic })
	optInt("maxConsumersPerSubscription", "max_consumers_per_subscription",
		func(p *resources.Policies) **int { return &p.MaxConsumersPerSubscription })
	optInt("maxUnackedMessagesPerConsumer", "max_unacked_messages_per_consumer",
		func(p *resources.Policies) **int { return &p.MaxUnackedMessagesPerConsumer })
	optInt("maxUnackedMessagesPerSubscription", "max_unacked_messages_per_subscription",
		func(p *resources.Policies) **int { return &p.MaxUnackedMessagesPerSubscription })
	optInt("maxSubscriptionsPerTopic", "max_subscriptions_per_topic",
		func(p *resources.Policies) **int { return &p.MaxSubscriptionsPerTopic })
	// deduplicationSnapshotInterval is optInt's but for POST: pulsar-admin's
	// remove-deduplication-snapshot-interval POSTs no value (Pulsar's Java
	// client sends null), which unsets it.
	mux.HandleFunc("GET "+ns+"deduplicationSnapshotInterval", a.getter(func(p *resources.Policies) any {
		return opt(p.DeduplicationSnapshotIntervalSeconds)
	}))
	mux.HandleFunc("DELETE "+ns+"deduplicationSnapshotInterval", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.DeduplicationSnapshotIntervalSeconds = nil
		return nil
	}))
	mux.HandleFunc("POST "+ns+"deduplicationSnapshotInterval", func(w http.ResponseWriter, r *http.Request) {
		var v *int
		if err := decodeBody(w, r, "deduplicationSnapshotIntervalSeconds", &v); err != nil && !errors.Is(err, errNoBody) {
			a.fail(w, r, err)
			return
		}
		a.update(w, r, func(p *resources.Policies) error {
			p.DeduplicationSnapshotIntervalSeconds = v
			return nil
		})
	})
	// Checked here first for Pulsar's own words (clients compare them).
	mux.HandleFunc("GET "+ns+"maxTopicsPerNamespace", a.getter(func(p *resources.Policies) any { return opt(p.MaxTopicsPerNamespace) }))
	mux.HandleFunc("POST "+ns+"maxTopicsPerNamespace", func(w http.ResponseWriter, r *http.Request) {
		var v int
		if err := requireBody(w, r, "max_topics_per_namespace", &v); err != nil {
			a.fail(w, r, err)
			return
		}
		if v < 0 {
			a.fail(w, r, Errorf(resources.ErrPrecondition, "maxTopicsPerNamespace must be 0 or more"))
			return
		}
		a.update(w, r, func(p *resources.Policies) error { p.MaxTopicsPerNamespace = &v; return nil })
	})
	mux.HandleFunc("DELETE "+ns+"maxTopicsPerNamespace", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.MaxTopicsPerNamespace = nil
		return nil
	}))

	mux.HandleFunc("GET "+ns+"deduplication", a.getter(func(p *resources.Policies) any { return opt(p.DeduplicationEnabled) }))
	mux.HandleFunc("POST "+ns+"deduplication", setter(a, "deduplicationEnabled", func(p *resources.Policies, v bool) { p.DeduplicationEnabled = &v }))
	mux.HandleFunc("DELETE "+ns+"deduplication", a.updater(func(_ *http.Request, p *resources.Policies) error { p.DeduplicationEnabled = nil; return nil }))

	// Properties: PUT adds to them (or replaces the values of keys it
	// names), GET answers them ({} when none), DELETE removes them all.
	mux.HandleFunc("GET "+ns+"properties", a.getter(func(p *resources.Policies) any {
		if p.Properties == nil {
			return map[string]string{}
		}
		return p.Properties
	}))
	mux.HandleFunc("PUT "+ns+"properties", func(w http.ResponseWriter, r *http.Request) {
		var props map[string]string
		if err := requireBody(w, r, "properties", &props); err != nil {
			a.fail(w, r, err)
			return
		}
		a.update(w, r, func(p *resources.Policies) error {
			if p.Properties == nil {
				p.Properties = map[string]string{}
			}
			maps.Copy(p.Properties, props)
			return nil
		})
	})
	mux.HandleFunc("DELETE "+ns+"properties", a.updater(func(_ *http.Request, p *resources.Policies) error { p.Properties = nil; return nil }))

	mux.HandleFunc("GET "+ns+"isAllowAutoUpdateSchema", a.getter(func(p *resources.Policies) any { return opt(p.IsAllowAutoUpdateSchema) }))
	mux.HandleFunc("POST "+ns+"isAllowAutoUpdateSchema", setter(a, "is_allow_auto_update_schema",
		func(p *resources.Policies, v bool) { p.IsAllowAutoUpdateSchema = &v }))

	mux.HandleFunc("GET "+ns+"retention", a.getter(func(p *resources.Policies) any { return opt(p.RetentionPolicies) }))
	mux.HandleFunc("POST "+ns+"retention", setter(a, "retention_policies",
		func(p *resources.Policies, v resources.RetentionPolicies) { p.RetentionPolicies = &v }))
	mux.HandleFunc("DELETE "+ns+"retention", a.updater(func(_ *http.Request, p *resources.Policies) error { p.RetentionPolicies = nil; return nil }))

	mux.HandleFunc("GET "+ns+"persistence", a.getter(func(p *resources.Policies) any { return opt(p.Persistence) }))
	mux.HandleFunc("POST "+ns+"persistence", setter(a, "persistence",
		func(p *resources.Policies, v resources.PersistencePolicies) { p.Persistence = &v }))
	mux.HandleFunc("DELETE "+ns+"persistence", a.updater(func(_ *http.Request, p *resources.Policies) error { p.Persistence = nil; return nil }))
	mux.HandleFunc("GET "+ns+"persistence/bookieAffinity", a.getter(func(p *resources.Policies) any { return opt(p.BookieAffinityGroup) }))
	mux.HandleFunc("POST "+ns+"persistence/bookieAffinity", setter(a, "bookieAffinityGroup",
		func(p *resources.Policies, v resources.BookieAffinityGroupData) { p.BookieAffinityGroup = &v }))
	mux.HandleFunc("DELETE "+ns+"persistence/bookieAffinity", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.BookieAffinityGroup = nil
		return nil
	}))

	// Keyed by this broker's cluster, as Pulsar's: each limit is for the
	// dispatchers (replicators, topics, subscriptions) of the cluster it
	// was set in.
	clusterKeyedRoutes(a, mux, ns, "replicatorDispatchRate", func(p *resources.Policies) *map[string]resources.DispatchRate {
		return &p.ReplicatorDispatchRate
	})
	clusterKeyedRoutes(a, mux, ns, "dispatchRate", func(p *resources.Policies) *map[string]resources.DispatchRate {
		return &p.TopicDispatchRate
	})
	clusterKeyedRoutes(a, mux, ns, "subscriptionDispatchRate", func(p *resources.Policies) *map[string]resources.DispatchRate {
		return &p.SubscriptionDispatchRate
	})
	clusterKeyedRoutes(a, mux, ns, "publishRate", func(p *resources.Policies) *map[string]resources.PublishRate {
		return &p.PublishMaxMessageRate
	})
	clusterKeyedRoutes(a, mux, ns, "subscribeRate", func(p *resources.Policies) *map[string]resources.SubscribeRate {
		return &p.ClusterSubscribeRate
	})

	mux.HandleFunc("GET "+ns+"autoSubscriptionCreation", a.getter(func(p *resources.Policies) any { return opt(p.AutoSubscriptionCreationOverride) }))
	mux.HandleFunc("POST "+ns+"autoSubscriptionCreation", setter(a, "autoSubscriptionCreationOverride",
		func(p *resources.Policies, v resources.AutoSubscriptionCreationOverride) {
			p.AutoSubscriptionCreationOverride = &v
		}))
	mux.HandleFunc("DELETE "+ns+"autoSubscriptionCreation", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.AutoSubscriptionCreationOverride = nil
		return nil
	}))

	mux.HandleFunc("GET "+ns+"autoTopicCreation", a.getter(func(p *resources.Policies) any { return opt(p.AutoTopicCreationOverride) }))
	mux.HandleFunc("POST "+ns+"autoTopicCreation", setter(a, "autoTopicCreationOverride",
		func(p *resources.Policies, v resources.AutoTopicCreationOverride) { p.AutoTopicCreationOverride = &v }))
	mux.HandleFunc("DELETE "+ns+"autoTopicCreation", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.AutoTopicCreationOverride = nil
		return nil
	}))
}

// getter answers one value picked from the namespace's policies; a nil
// pick is "not set": 204 with no body.
func (a *api) getter(pick func(*resources.Policies) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
		p, err := a.res.GetNamespace(r.Context(), tenant, ns)
		if err != nil {
			a.fail(w, r, a.pulsarNotFound(r.Context(), tenant, ns, err))
			return
		}
		v := pick(&p)
		if v == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		WriteJSON(w, v)
	}
}

// setter decodes a T body (field names it in errors) and applies it.
func setter[T any](a *api, field string, apply func(*resources.Policies, T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var v T
		if err := requireBody(w, r, field, &v); err != nil {
			a.fail(w, r, err)
			return
		}
		a.update(w, r, func(p *resources.Policies) error {
			apply(p, v)
			return nil
		})
	}
}

// updater changes the policies with mutate.
func (a *api) updater(mutate func(*http.Request, *resources.Policies) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a.update(w, r, func(p *resources.Policies) error { return mutate(r, p) })
	}
}

func (a *api) update(w http.ResponseWriter, r *http.Request, mutate func(*resources.Policies) error) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if _, err := a.res.UpdateNamespace(r.Context(), tenant, ns, mutate); err != nil {
		a.fail(w, r, a.pulsarNotFound(r.Context(), tenant, ns, err))
		return
	}
	a.log.Info("namespace policies changed", "namespace", tenant+"/"+ns, "method", r.Method, "path", r.URL.Path)
	done(w)
}

// pulsarNotFound restates a namespace policy call's missing namespace in
// Pulsar's words, which tools match: "Tenant does not exist" when its
// tenant is missing too (Pulsar checks the tenant first), else "Namespace
// does not exist". Other errors pass as they are.
func (a *api) pulsarNotFound(ctx context.Context, tenant, ns string, err error) error {
	if !errors.Is(err, resources.ErrNotFound) {
		return err
	}
	if ok, e := a.res.NamespaceExists(ctx, tenant, ns); e != nil || ok {
		return err // something else is missing
	}
	if ok, e := a.res.TenantExists(ctx, tenant); e == nil && !ok {
		return Errorf(resources.ErrNotFound, "Tenant does not exist")
	}
	return Errorf(resources.ErrNotFound, "Namespace does not exist")
}

// backlogQuotaType reads ?backlogQuotaType=, destination_storage if absent.
func backlogQuotaType(r *http.Request) (resources.BacklogQuotaType, error) {
	switch t := resources.BacklogQuotaType(r.URL.Query().Get("backlogQuotaType")); t {
	case "", resources.DestinationStorage:
		return resources.DestinationStorage, nil
	case resources.MessageAge:
		return t, nil
	default:
		return "", invalid("backlogQuotaType", fmt.Sprintf("unknown type %q, want %s or %s",
			t, resources.DestinationStorage, resources.MessageAge))
	}
}

func (a *api) setBacklogQuota(w http.ResponseWriter, r *http.Request) {
	typ, err := backlogQuotaType(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var q resources.BacklogQuota
	if err := requireBody(w, r, "backlog_quota_map."+string(typ), &q); err != nil {
		a.fail(w, r, err)
		return
	}
	a.update(w, r, func(p *resources.Policies) error {
		if p.BacklogQuotaMap == nil {
			p.BacklogQuotaMap = map[resources.BacklogQuotaType]resources.BacklogQuota{}
		}
		p.BacklogQuotaMap[typ] = q
		return nil
	})
}

func (a *api) removeBacklogQuota(w http.ResponseWriter, r *http.Request) {
	typ, err := backlogQuotaType(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.update(w, r, func(p *resources.Policies) error {
		delete(p.BacklogQuotaMap, typ)
		return nil
	})
}

func (a *api) setReplication(w http.ResponseWriter, r *http.Request) {
	var clusters []string
	if err := requireBody(w, r, "replication_clusters", &clusters); err != nil {
		a.fail(w, r, err)
		return
	}
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if _, err := a.res.SetReplicationClusters(r.Context(), tenant, ns, clusters); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("namespace replication set", "namespace", tenant+"/"+ns, "clusters", clusters)
	done(w)
}

// grantSubscriptionPermission adds roles to those that may consume a
// subscription, as Pulsar's grantPermissionOnSubscription.
func (a *api) grantSubscriptionPermission(w http.ResponseWriter, r *http.Request) {
	sub := r.PathValue("subscription")
	var roles []string
	if err := requireBody(w, r, "auth_policies.subscription_auth_roles."+sub, &roles); err != nil {
		a.fail(w, r, err)
		return
	}
	a.update(w, r, func(p *resources.Policies) error {
		if p.AuthPolicies.SubscriptionAuthRoles == nil {
			p.AuthPolicies.SubscriptionAuthRoles = map[string][]string{}
		}
		have := p.AuthPolicies.SubscriptionAuthRoles[sub]
		for _, role := range roles {
			if !slices.Contains(have, role) {
				have = append(have, role)
			}
		}
		p.AuthPolicies.SubscriptionAuthRoles[sub] = have
		return nil
	})
}

func (a *api) grantPermission(w http.ResponseWriter, r *http.Request) {
	role := r.PathValue("role")
	var actions []resources.AuthAction
	if err := requireBody(w, r, "auth_policies.namespace_auth."+role, &actions); err != nil {
		a.fail(w, r, err)
		return
	}
	a.update(w, r, func(p *resources.Policies) error {
		if p.AuthPolicies.NamespaceAuth == nil {
			p.AuthPolicies.NamespaceAuth = map[string][]resources.AuthAction{}
		}
		p.AuthPolicies.NamespaceAuth[role] = orEmpty(actions)
		return nil
	})
}

// opt turns a nil pointer into an untyped nil ("not set") and otherwise
// yields the value, so that getters never answer a JSON null.
func opt[T any](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}

func orEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// registerOffloadPolicies serves the namespace's tiered storage settings:
// offloadThreshold and offloadThresholdInSeconds (-1: off; set with PUT),
// offloadDeletionLagMs (PUT, DELETE), offloadPolicies (POST; DELETE at
// removeOffloadPolicies, Pulsar's path). A driver must be one of
// Pulsar's.
func (a *api) registerOffloadPolicies(mux *http.ServeMux, ns string) {
	mux.HandleFunc("GET "+ns+"offloadThreshold", a.getter(func(p *resources.Policies) any { return p.OffloadThreshold }))
	mux.HandleFunc("GET "+ns+"offloadThresholdInSeconds", a.getter(func(p *resources.Policies) any {
		if p.OffloadThresholdInSeconds == nil {
			return int64(-1)
		}
		return *p.OffloadThresholdInSeconds
	}))
	mux.HandleFunc("GET "+ns+"offloadDeletionLagMs", a.getter(func(p *resources.Policies) any { return opt(p.OffloadDeletionLagMs) }))
	mux.HandleFunc("GET "+ns+"offloadPolicies", a.getter(func(p *resources.Policies) any { return opt(p.OffloadPolicies) }))
	for _, method := range []string{"PUT", "POST"} {
		mux.HandleFunc(method+" "+ns+"offloadThreshold", setter(a, "offload_threshold", func(p *resources.Policies, v int64) {
			p.OffloadThreshold = v
		}))
		mux.HandleFunc(method+" "+ns+"offloadThresholdInSeconds", func(w http.ResponseWriter, r *http.Request) {
			var v int64
			if err := requireBody(w, r, "offload_threshold_in_seconds", &v); err != nil {
				a.fail(w, r, err)
				return
			}
			if v < -1 { // Pulsar's words: clients compare them
				a.fail(w, r, Errorf(resources.ErrPrecondition, "Invalid value for offloadThresholdInSecond"))
				return
			}
			a.update(w, r, func(p *resources.Policies) error { p.OffloadThresholdInSeconds = &v; return nil })
		})
		mux.HandleFunc(method+" "+ns+"offloadDeletionLagMs", func(w http.ResponseWriter, r *http.Request) {
			var v int64
			if err := requireBody(w, r, "offload_deletion_lag_ms", &v); err != nil {
				a.fail(w, r, err)
				return
			}
			if v < 0 {
				a.fail(w, r, Errorf(resources.ErrPrecondition, "offloadDeletionLagMs must be 0 or more"))
				return
			}
			a.update(w, r, func(p *resources.Policies) error { p.OffloadDeletionLagMs = &v; return nil })
		})
	}
	mux.HandleFunc("DELETE "+ns+"offloadDeletionLagMs", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.OffloadDeletionLagMs = nil
		return nil
	}))
	mux.HandleFunc("POST "+ns+"offloadPolicies", func(w http.ResponseWriter, r *http.Request) {
		var v resources.OffloadPolicies
		if err := requireBody(w, r, "offload_policies", &v); err != nil {
			a.fail(w, r, err)
			return
		}
		if err := CheckOffloadDriver(v.ManagedLedgerOffloadDriver); err != nil {
			a.fail(w, r, err)
			return
		}
		a.update(w, r, func(p *resources.Policies) error { p.OffloadPolicies = &v; return nil })
	})
	mux.HandleFunc("DELETE "+ns+"removeOffloadPolicies", a.updater(func(_ *http.Request, p *resources.Policies) error {
		p.OffloadPolicies = nil
		return nil
	}))
}

// CheckOffloadDriver refuses a driver name Pulsar does not know (412, as
// Pulsar answers), listing the ones it does.
func CheckOffloadDriver(driver string) error {
	if driver == "" || offload.KnownDriver(driver) {
		return nil
	}
	return Errorf(resources.ErrPrecondition, "offload driver %q is not supported, support value: %s", driver, strings.Join(offload.PulsarDrivers(), ","))
}
