package schema

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// incompatible builds an ErrIncompatible error with its reason.
func incompatible(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrIncompatible, fmt.Sprintf(format, args...))
}

// checkAgainst checks candidate against each target version under
// strategy, newest first, naming the first version that refuses it.
func checkAgainst(targets []Version, candidate Info, s Strategy) error {
	for i := len(targets) - 1; i >= 0; i-- {
		if err := checkPair(targets[i].Info, candidate, s); err != nil {
			return fmt.Errorf("against version %d with %s: %w", targets[i].Version, s, err)
		}
	}
	return nil
}

// producerTargets picks what a new schema is checked against, as Pulsar's
// putSchemaIfAbsent does: the latest version, or for transitive strategies
// every version since the last deletion. live holds only those.
func producerTargets(live []Version, s Strategy) []Version {
	if len(live) == 0 || s == AlwaysCompatible {
		return nil
	}
	if s.Transitive() {
		return live
	}
	return live[len(live)-1:]
}

// consumerCheck is Pulsar's checkConsumerCompatibility: a consumer's schema
// must read what producers write. For the non-transitive strategies and
// FORWARD_TRANSITIVE that is a BACKWARD check against the latest version;
// the others check every live version with the strategy itself.
func consumerCheck(live []Version, candidate Info, s Strategy) error {
	// AUTO_CONSUME consumers take whatever schema the topic has.
	if candidate.Type == AutoConsume || s == AlwaysCompatible {
		return nil
	}
	if len(live) == 0 {
		return fmt.Errorf("%w: the topic has no schema to check the consumer's against", ErrNotFound)
	}
	switch s {
	case Backward, Forward, ForwardTransitive, Full:
		return checkAgainst(live[len(live)-1:], candidate, Backward)
	}
	return checkAgainst(live, candidate, s)
}

// checkPair checks one existing schema against a candidate. The type must
// not change; identical data is always compatible; otherwise the type's
// checker decides, as Pulsar's default checker set does (AVRO and JSON by
// Avro schema resolution, PROTOBUF_NATIVE by its root message, KEY_VALUE
// part by part, everything else by type alone).
func checkPair(existing, candidate Info, s Strategy) error {
	if s == AlwaysCompatible {
		return nil
	}
	if existing.Type != candidate.Type {
		return incompatible("existing schema type %s, new schema type %s", existing.Type, candidate.Type)
	}
	if sameSchema(existing, candidate) {
		return nil
	}
	if s == AlwaysIncompatible {
		return incompatible("strategy %s refuses any change", s)
	}
	switch candidate.Type {
	case Avro:
		return avroCompatible(existing.Data, candidate.Data, s)
	case JSON:
		return jsonCompatible(existing.Data, candidate.Data, s)
	case ProtobufNative:
		return protobufNativeCompatible(existing.Data, candidate.Data)
	case KeyValue:
		return keyValueCompatible(existing, candidate, s)
	}
	// PROTOBUF included: Pulsar ships ProtobufSchemaCompatibilityCheck but
	// leaves it out of the default schemaRegistryCompatibilityCheckers, so
	// its brokers accept any PROTOBUF change; so do we.
	return nil
}

// avroCompatible applies Avro schema resolution in the strategy's
// direction: BACKWARD means the new schema reads data the old one wrote,
// FORWARD the reverse, FULL both.
func avroCompatible(existing, candidate []byte, s Strategy) error {
	old, err := parseAvro(existing)
	if err != nil {
		return incompatible("the stored schema is not valid Avro: %v", err)
	}
	nw, err := parseAvro(candidate)
	if err != nil {
		return incompatible("the new schema is not valid Avro: %v", err)
	}
	backward := s == Backward || s == BackwardTransitive || s == Full || s == FullTransitive
	forward := s == Forward || s == ForwardTransitive || s == Full || s == FullTransitive
	if !backward && !forward {
		return incompatible("no Avro check for strategy %s", s)
	}
	c := avro.NewSchemaCompatibility()
	if backward {
		if err := c.Compatible(nw, old); err != nil {
			return incompatible("the new schema cannot read data written with the existing one: %v", err)
		}
	}
	if forward {
		if err := c.Compatible(old, nw); err != nil {
			return incompatible("the existing schema cannot read data written with the new one: %v", err)
		}
	}
	return nil
}

// jsonCompatible is Pulsar's JsonSchemaCompatibilityCheck: Avro
// definitions are checked as Avro; a switch between an Avro definition and
// a legacy Jackson JSON Schema is allowed either way (the format changed,
// not the data); two legacy schemas must have the same "id".
func jsonCompatible(existing, candidate []byte, s Strategy) error {
	_, errOld := parseAvro(existing)
	_, errNew := parseAvro(candidate)
	switch {
	case errOld == nil && errNew == nil:
		return avroCompatible(existing, candidate, s)
	case errOld == nil || errNew == nil:
		return nil
	case !legacyJSONSchema(existing):
		return nil // Pulsar lets an unreadable stored schema be replaced
	}
	oldID, err1 := legacyJSONID(existing)
	newID, err2 := legacyJSONID(candidate)
	if err := errors.Join(err1, err2); err != nil {
		return incompatible("legacy JSON schema: %v", err)
	}
	if oldID != newID {
		return incompatible("legacy JSON schema id changed from %q to %q", oldID, newID)
	}
	return nil
}

func legacyJSONID(data []byte) (string, error) {
	var v struct {
		ID string `json:"id"`
	}
	err := json.Unmarshal(data, &v)
	return v.ID, err
}

// protobufNativeCompatible is what Pulsar's default
// ProtobufNativeSchemaCompatibilityCheck verifies for every strategy but
// the two ALWAYS ones: the root message keeps its full name. Field-level
// checks (ProtobufNativeSchemaAdvancedCompatibilityCheck) are opt-in in
// Pulsar and not done here.
func protobufNativeCompatible(existing, candidate []byte) error {
	oldRoot, err := protobufNativeRoot(existing)
	if err != nil {
		return incompatible("the stored PROTOBUF_NATIVE schema: %v", err)
	}
	newRoot, err := protobufNativeRoot(candidate)
	if err != nil {
		return incompatible("the new PROTOBUF_NATIVE schema: %v", err)
	}
	if oldRoot != newRoot {
		return incompatible("protobuf root message changed from %s to %s", oldRoot, newRoot)
	}
	return nil
}

// keyValueCompatible is Pulsar's KeyValueSchemaCompatibilityCheck: the key
// and value parts keep their types and each passes its own type's check.
func keyValueCompatible(existing, candidate Info, s Strategy) error {
	oldKey, oldValue, err := splitKeyValueInfo(existing)
	if err != nil {
		return incompatible("the stored key/value schema: %v", err)
	}
	newKey, newValue, err := splitKeyValueInfo(candidate)
	if err != nil {
		return incompatible("the new key/value schema: %v", err)
	}
	if err := checkPair(oldKey, newKey, s); err != nil {
		return fmt.Errorf("key schema: %w", err)
	}
	if err := checkPair(oldValue, newValue, s); err != nil {
		return fmt.Errorf("value schema: %w", err)
	}
	return nil
}
