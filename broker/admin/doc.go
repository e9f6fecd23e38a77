// Package admin serves the metadata-only part of Pulsar's admin REST API
// v2 (clusters, tenants, namespaces and their policies) as pulsar-admin and
// pulsaradmin (github.com/apache/pulsar-client-go/pulsaradmin) call it,
// over package resources. Bodies and answers are Pulsar's JSON (see
// package resources for the shapes).
//
// # Endpoints
//
//	GET                 /admin/v2/clusters
//	GET PUT POST DELETE /admin/v2/clusters/{cluster}
//	GET POST            /admin/v2/clusters/{cluster}/peers
//	GET                 /admin/v2/tenants
//	GET PUT POST DELETE /admin/v2/tenants/{tenant}
//	GET                 /admin/v2/namespaces/{tenant}
//	GET PUT DELETE      /admin/v2/namespaces/{tenant}/{namespace}
//	GET                 /admin/v2/namespaces/{tenant}/{namespace}/topics    (?mode=)
//	GET                 /admin/v2/namespaces/{tenant}/{namespace}/bundles
//	GET POST DELETE     .../retention, .../messageTTL, .../deduplication,
//	                    .../autoTopicCreation, .../maxProducersPerTopic,
//	                    .../maxConsumersPerTopic, .../maxUnackedMessagesPerConsumer
//	GET                 .../backlogQuotaMap
//	POST DELETE         .../backlogQuota                (?backlogQuotaType=)
//	GET POST            .../replication
//	GET                 .../permissions
//	POST DELETE         .../permissions/{role}
//	GET PUT             .../schemaCompatibilityStrategy
//	GET POST            .../isAllowAutoUpdateSchema
//
// # Answers
//
// Reads answer 200 with JSON, or 204 with no body for a policy that is not
// set (Pulsar's null). Changes answer 204. Errors answer
// {"reason": "..."} with Pulsar's statuses (StatusOf): 400 for a bad name,
// value or JSON (the reason names the field), 403 for a cluster the tenant
// may not use, 404 for an unknown cluster, tenant or namespace, 405 for
// forced deletion (refused, as by Pulsar's default configuration), 409 for
// what exists already or is not empty, 412 for changes other metadata
// forbids (a cluster in use, a tenant without clusters), 500 otherwise.
// WriteError, WriteJSON and StatusOf are exported so the broker's own
// admin endpoints answer alike.
//
// Topics are the broker's state, not the configuration store's: the
// broker answers for them through NamespaceTopics.
//
// # Routing
//
// Register uses Go 1.22 method-and-wildcard patterns. Patterns on one
// ServeMux must not overlap without one being more specific, or
// ServeMux.Handle panics: a broker pattern with a wildcard domain and a
// literal fifth segment, such as "POST /admin/v2/{domain}/{tenant}/{namespace}/{topic}/retention",
// overlaps "POST /admin/v2/namespaces/{tenant}/{namespace}/permissions/{role}".
// Topic endpoints should therefore spell the domain out
// (/admin/v2/persistent/..., /admin/v2/non-persistent/...).
package admin
