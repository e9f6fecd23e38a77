// Package resources is typed access to the configuration-store metadata
// that Magnetar shares with Apache Pulsar: clusters, tenants, namespace
// policies and partitioned topics, at Pulsar's paths and in Pulsar's JSON,
// so that a store written by Pulsar's tools reads back here and the other
// way round.
//
// # Paths and shapes
//
// JSON member names are Pulsar's (Java field names), not Go's:
//
//	/admin/clusters/<cluster>                         ClusterData
//	    {"serviceUrl": "http://h:8080", "serviceUrlTls": "https://h:8443",
//	     "brokerServiceUrl": "pulsar://h:6650", "brokerServiceUrlTls": "pulsar+ssl://h:6651",
//	     "peerClusterNames": ["c2"], "brokerClientTlsEnabled": false, ...}
//	/admin/policies/<tenant>                          TenantInfo
//	    {"adminRoles": ["admin"], "allowedClusters": ["c1"]}
//	/admin/policies/<tenant>/<namespace>              Policies
//	    {"auth_policies": {"namespace_auth": {"role": ["produce", "consume"]},
//	                       "destination_auth": {}, "subscription_auth_roles": {}},
//	     "replication_clusters": ["c1"],
//	     "bundles": {"boundaries": ["0x00000000", "0x40000000", "0x80000000",
//	                                "0xc0000000", "0xffffffff"], "numBundles": 4},
//	     "backlog_quota_map": {"destination_storage": {"limit": 1073741824,
//	         "limitSize": 1073741824, "limitTime": -1, "policy": "producer_request_hold"}},
//	     "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024},
//	     "message_ttl_in_seconds": 3600, "deduplicationEnabled": true,
//	     "autoTopicCreationOverride": {"allowAutoTopicCreation": true,
//	         "topicType": "partitioned", "defaultNumPartitions": 3},
//	     "max_producers_per_topic": 10, "max_consumers_per_topic": 10,
//	     "max_unacked_messages_per_consumer": 1000,
//	     "schema_compatibility_strategy": "UNDEFINED",
//	     "schema_auto_update_compatibility_strategy": "Full",
//	     "is_allow_auto_update_schema": true, "deleted": false, ...}
//	/admin/partitioned-topics/<tenant>/<namespace>/<domain>/<encoded local name>
//	    {"partitions": 3}
//	/admin/topic-policies/<tenant>/<namespace>/<domain>/<encoded local name>
//	    {"replicationClusters": ["east", "west"]}   (Magnetar's; Pulsar uses a system topic)
//
// The last segment of a partitioned topic's path is the local name
// encoded as Java's URLEncoder does (Pulsar's Codec.encode): letters,
// digits and ".-*_" as they are, space as '+', other bytes as %XX.
//
// Absent or null values mean "not set, the broker's default applies";
// Go models them as nil pointers. Collections are written as [] or {},
// never null, because Java readers expect them. Members this package does
// not model (dispatch rates, offload policies, whatever later Pulsar
// versions add) are kept in each type's Extra and written back verbatim,
// so a read-modify-write here never erases settings made elsewhere.
//
// # Bundles
//
// A namespace's bundles split the 32-bit hash space [0x00000000,
// 0xffffffff] into ranges; n bundles have n+1 boundaries. EvenBoundaries
// gives Pulsar's even split (default 4: 0x00000000, 0x40000000,
// 0x80000000, 0xc0000000, 0xffffffff) and ValidateBoundaries checks given
// ones (strictly increasing, from the first to the last boundary).
//
// # Updates
//
// Update* read the node, apply a caller's mutator to a private copy,
// validate the whole result, and write it with compare-and-set on the
// node's version; on a conflict they start again from a fresh read, so
// concurrent updaters (other brokers, Pulsar's tools) all land. Nothing is
// written when the mutator or validation fails.
//
// Checks that span nodes (a cluster still in use, a tenant still holding
// namespaces, a replication cluster that must exist) are made before the
// write, as Pulsar makes them: the store has no multi-node transactions,
// so a concurrent change can slip between check and write.
//
// # Errors
//
// Every error wraps one kind, tested with errors.Is: ErrInvalid (a
// FieldError naming the field, e.g. "retention_policies.retentionTimeInMinutes:
// must be >= -1, got -5"), ErrNotFound, ErrExists, ErrNotEmpty,
// ErrPrecondition, ErrNotAllowed, ErrConflict, ErrCorrupt; anything else
// is the store's own error.
//
// # Cache
//
// GetNamespaceCached serves namespace policies from a metadata.Cache that
// a watch on /admin/policies invalidates, for the broker's hot paths;
// GetNamespace reads the store, for callers that must see their own
// writes at once. NamespaceShared is the cached value without
// GetNamespaceCached's copy, for per-topic checks that only read it.
package resources
