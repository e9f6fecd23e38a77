// Package schema is the broker's schema registry: Pulsar's
// SchemaRegistryService over the metadata store.
//
// # Histories
//
// A schema history belongs to a schema id, the topic name without domain
// and without "-partition-N" (Pulsar's TopicName.getSchemaName), so every
// partition of a partitioned topic, and a persistent and a non-persistent
// topic of one name, share one history. Versions are int64s counting from
// 0. Each stores a type (Pulsar's SchemaType names and numbers), the
// schema data, properties, a timestamp, the user, and a deleted flag.
//
// Deleting a schema appends a deletion marker, as Pulsar does: readers then
// see no schema, the versions before it no longer count for lookups or
// compatibility, and the next schema starts a fresh history while the
// version numbers keep counting. A hard delete (topic deletion, or the
// admin DELETE with force=true) removes the nodes.
//
// # Storage layout
//
// One metadata node per version, never modified once written:
//
//	/schemas/<tenant>/<namespace>/<topic>/<version, 10 digits zero-padded>
//
//	{"version": 3, "type": "AVRO", "data": "<base64>", "properties": {...},
//	 "timestamp": <ms since epoch>, "user": "...", "deleted": false}
//
// The zero padding makes the store's sorted child list the version order.
// A version is added with Create at the number after the highest stored,
// so of two brokers racing for a number exactly one wins; the other
// re-reads the history (finding the winner's schema, or checking its own
// against it) and tries the next number. Nothing is cached between calls,
// so brokers sharing the store always see each other's writes.
//
// A node that does not decode, names an unknown type, holds another
// version than its name says, or is not named as a version is ErrCorrupt,
// never "not found": an unreadable history must not be overwritten as if
// empty. Schema data is limited to MaxDataSize (512 KiB) so that a version
// fits a metadata node (1 MiB) in base64.
//
// # Registering and compatibility
//
// PutIfCompatible (the producer's GET_OR_CREATE_SCHEMA) first looks for
// an identical schema since the last deletion (same type and data; Avro
// definitions compared by JSON content; properties not compared, as in
// Pulsar) and returns its version. Otherwise, if the namespace allows auto
// update, the schema is checked against the namespace's strategy and
// stored; with auto update disallowed it is refused even on an empty
// history, as in Pulsar, and only the admin upload (PutAdmin) may add it.
//
// Strategies are Pulsar's: ALWAYS_COMPATIBLE skips every check (even a
// type change); ALWAYS_INCOMPATIBLE refuses any change to an existing
// schema; BACKWARD (the new schema reads data written with the old),
// FORWARD (the old reads data written with the new) and FULL (both) check
// the latest version, and their _TRANSITIVE forms every version since the
// last deletion. UNDEFINED resolves to the broker's default, FULL unless
// configured. The type may never change otherwise. Per type, as Pulsar's
// default checkers: AVRO and JSON (whose data is an Avro record) by Avro
// schema resolution (github.com/hamba/avro/v2); PROTOBUF_NATIVE by the
// root message's full name only; KEY_VALUE part by part (see
// SplitKeyValue); PROTOBUF and the primitive types by type alone.
//
// A consumer's schema (CheckConsumerCompatibility) must read what
// producers write: a BACKWARD check against the latest version for
// BACKWARD, FORWARD, FULL and FORWARD_TRANSITIVE, and the strategy itself
// against every live version for the others.
package schema
