package resources

import (
	"encoding/json"
	"reflect"
	"strings"
)

// Pulsar keeps adding fields to its metadata. A read-modify-write here must
// not drop the ones this package does not model, or a Magnetar admin call
// would silently erase settings made with Pulsar's tools. Each top-level
// type therefore keeps the JSON members it does not claim in an Extra map
// and writes them back unchanged.

// decodeWithExtra decodes data into known (a pointer to a struct) and
// returns the members none of its fields claims. Members that are JSON
// null are dropped: for Pulsar, absent and null are the same, and storing
// a null where Java expects a collection would break Java readers.
func decodeWithExtra(data []byte, known any) (map[string]json.RawMessage, error) {
	if err := json.Unmarshal(data, known); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	names := jsonNames(reflect.TypeOf(known).Elem())
	for k, v := range all {
		if claimed(names, k) || string(v) == "null" {
			delete(all, k)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

// encodeWithExtra encodes known and adds the extra members it lacks.
func encodeWithExtra(known any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// jsonNames lists the member names a struct's fields decode.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// claimed matches as encoding/json does: case-insensitively.
func claimed(names []string, key string) bool {
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return true
		}
	}
	return false
}
