// Package admin serves Pulsar's admin REST API v2 and HTTP lookup as
// pulsar-admin and pulsaradmin (github.com/apache/pulsar-client-go/pulsaradmin)
// call them. Register serves the metadata-only part (clusters, tenants,
// namespaces and their policies) over package resources; RegisterBroker
// serves what only a broker knows (topics, subscriptions, messages,
// brokers and bundles, broker-stats, bookies, dynamic configuration)
// over the interfaces in broker.go, which package broker implements.
// This package owns the routes, request parsing, the JSON (types.go and
// package resources), redirects and error statuses; the broker gathers
// state under its own locks and writes no HTTP. It never imports package
// broker.
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
//	                    .../maxConsumersPerTopic, .../maxUnackedMessagesPerConsumer,
//	                    .../persistence, .../persistence/bookieAffinity,
//	                    .../properties (GET PUT DELETE),
//	                    .../replicatorDispatchRate (this broker's cluster's)
//	GET                 .../backlogQuotaMap
//	POST DELETE         .../backlogQuota                (?backlogQuotaType=)
//	GET POST            .../replication
//	GET                 .../permissions
//	POST DELETE         .../permissions/{role}
//	GET PUT             .../schemaCompatibilityStrategy
//	GET POST            .../isAllowAutoUpdateSchema
//
// The broker's (RegisterBroker; {domain} is persistent or non-persistent):
//
//	GET                 /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}
//	GET PUT             /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions
//	POST DELETE         /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions   (update, delete)
//	PUT                 /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload
//	GET                 /admin/v2/{domain}/{tenant}/{namespace}       (topics), .../partitioned
//	PUT DELETE          /admin/v2/{domain}/{tenant}/{namespace}/{topic}
//	POST                .../{topic}/terminate
//	GET PUT DELETE      .../{topic}/properties (PUT merges a JSON object; DELETE ?key=)
//	GET                 .../{topic}/lastMessageId, /messageid/{timestamp}, /stats, /partitioned-stats, /internalStats,
//	                    /ledger/{ledger}/entry/{entry}, /examinemessage
//	GET POST DELETE     .../{topic}/replication (topic-level replication clusters)
//	GET                 .../{topic}/subscriptions
//	PUT DELETE          .../{topic}/subscription/{sub}
//	POST                .../subscription/{sub}/skip/{n}, /skip_all, /resetcursor[/{timestamp}],
//	                    /expireMessages/{seconds}; .../{topic}/all_subscription/expireMessages/{seconds}
//	GET                 .../subscription/{sub}/position/{n}
//	GET                 /admin/v2/brokers/{cluster}, /brokers/leaderBroker, /brokers/health,
//	                    /brokers/{cluster}/{broker}/ownedNamespaces
//	GET                 /admin/v2/broker-stats/load-report, /topics, /metrics, /mbeans
//	PUT                 /admin/v2/namespaces/{tenant}/{namespace}/unload, .../{bundle}/unload, .../{bundle}/split
//	GET                 /admin/v2/bookies/all
//	GET                 /admin/v2/bookies/racks-info
//	GET POST DELETE     /admin/v2/bookies/racks-info/{bookie}
//	GET                 /admin/v2/brokers/configuration[/values, /runtime], /brokers/internal-configuration
//	POST                /admin/v2/brokers/configuration/{key}/{value}
//	DELETE              /admin/v2/brokers/configuration/{key}
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
// The broker's endpoints add 404 for an unknown topic, subscription or
// message, 412 while clients are connected (without force) or without a
// metadata store, 501 for what the storage cannot do, 503 when the topic
// moved while the call ran. A call about a topic another broker serves
// is answered 307 to that broker. StatusOf is the one mapping from
// errors (resources', the metadata store's, the sentinels in errors.go,
// another broker's RemoteError) to statuses. WriteError and WriteJSON are
// exported so other packages' endpoints answer alike.
//
// Topics are the broker's state, not the configuration store's: the
// broker answers for them through NamespaceTopics and Topics.
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
