package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// Frozen storage constants: changing them orphans stored histories.
const (
	// rootPath holds every schema history, /schemas/<tenant>/<ns>/<topic>.
	rootPath = "/schemas"
	// versionDigits is the width of a version node's zero-padded name, so
	// that the store's sorted child names are in version order.
	versionDigits = 10
	// maxVersion is the largest version a 10-digit name can hold.
	maxVersion = 9_999_999_999
)

// record is a stored version, one metadata node, JSON-encoded. Data is
// base64 (encoding/json's []byte form). Unknown fields are ignored so that
// a later release may add some.
type record struct {
	Version    int64             `json:"version"`
	Type       string            `json:"type"`
	Data       []byte            `json:"data"`
	Properties map[string]string `json:"properties,omitempty"`
	Timestamp  int64             `json:"timestamp"` // milliseconds since the epoch
	User       string            `json:"user,omitempty"`
	Deleted    bool              `json:"deleted,omitempty"`
}

// historyPath is the node holding an id's versions.
func historyPath(id ID) string {
	return rootPath + "/" + id.Tenant + "/" + id.Namespace + "/" + id.Topic
}

// versionPath is the node of one version.
func versionPath(id ID, v int64) string {
	return historyPath(id) + "/" + versionName(v)
}

func versionName(v int64) string { return fmt.Sprintf("%0*d", versionDigits, v) }

// parseVersionName reads a version node's name; anything else under a
// history is corruption.
func parseVersionName(name string) (int64, bool) {
	if len(name) != versionDigits {
		return 0, false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// encodeRecord turns a version into its node value.
func encodeRecord(v Version) ([]byte, error) {
	return json.Marshal(record{
		Version: v.Version, Type: v.Type.String(), Data: v.Data, Properties: v.Properties,
		Timestamp: v.Timestamp.UnixMilli(), User: v.User, Deleted: v.Deleted,
	})
}

// decodeRecord reads the node at path, which must hold version want.
// Whatever cannot be a version this registry wrote is ErrCorrupt.
func decodeRecord(path string, want int64, b []byte) (Version, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return Version{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	t, err := ParseType(r.Type)
	if err != nil {
		return Version{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if r.Version != want {
		return Version{}, fmt.Errorf("%w: %s: holds version %d", ErrCorrupt, path, r.Version)
	}
	return Version{
		Info:    Info{Type: t, Data: r.Data, Properties: r.Properties},
		Version: r.Version, Timestamp: time.UnixMilli(r.Timestamp), User: r.User, Deleted: r.Deleted,
	}, nil
}

// maxReadAttempts bounds re-reads of a history that a hard delete is
// removing under the reader.
const maxReadAttempts = 4

// readHistory returns every stored version of id, deletion markers
// included, oldest first; none when there is no history.
func readHistory(ctx context.Context, st metadata.Store, id ID) ([]Version, error) {
	for range maxReadAttempts {
		h, err := readHistoryOnce(ctx, st, id)
		if !errors.Is(err, metadata.ErrNotFound) {
			return h, err
		}
	}
	return nil, fmt.Errorf("schema %s: history kept changing while read (deleted meanwhile?)", id)
}

// readHistoryOnce returns ErrNotFound (from the store) when a listed node
// vanished before it was read.
func readHistoryOnce(ctx context.Context, st metadata.Store, id ID) ([]Version, error) {
	names, err := st.Children(ctx, historyPath(id))
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schema %s: list versions: %w", id, err)
	}
	out := make([]Version, 0, len(names))
	for _, name := range names {
		v, ok := parseVersionName(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s/%s: not a version node", ErrCorrupt, historyPath(id), name)
		}
		path := versionPath(id, v)
		b, _, err := st.Get(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("schema %s: read version %d: %w", id, v, err)
		}
		rec, err := decodeRecord(path, v, b)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// live trims a history to the versions after its last deletion marker, as
// Pulsar's trimDeletedSchemaAndGetList; empty when the latest is deleted.
func live(history []Version) []Version {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Deleted {
			return history[i+1:]
		}
	}
	return history
}

// nextVersion is the number the next stored version takes: numbers keep
// counting across deletions.
func nextVersion(history []Version) int64 {
	if len(history) == 0 {
		return 0
	}
	return history[len(history)-1].Version + 1
}

// createVersion stores v as a new node. Create, not Put: of brokers racing
// for one number exactly one wins, the others get metadata.ErrExists.
func createVersion(ctx context.Context, st metadata.Store, id ID, v Version) error {
	if v.Version > maxVersion {
		return fmt.Errorf("schema %s: version %d exceeds the %d-digit limit", id, v.Version, versionDigits)
	}
	v.Properties = maps.Clone(v.Properties)
	b, err := encodeRecord(v)
	if err != nil {
		return fmt.Errorf("schema %s: encode version %d: %w", id, v.Version, err)
	}
	if _, _, err := st.Create(ctx, versionPath(id, v.Version), b, metadata.CreateOptions{}); err != nil {
		return fmt.Errorf("schema %s: store version %d: %w", id, v.Version, err)
	}
	return nil
}

// removeHistory deletes every version node of id, then the history node.
// A version stored meanwhile makes the last step fail with ErrNotEmpty.
func removeHistory(ctx context.Context, st metadata.Store, id ID) error {
	names, err := st.Children(ctx, historyPath(id))
	if errors.Is(err, metadata.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("schema %s: list versions: %w", id, err)
	}
	for _, name := range names {
		err := st.Delete(ctx, historyPath(id)+"/"+name, metadata.AnyVersion)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return fmt.Errorf("schema %s: delete %s: %w", id, name, err)
		}
	}
	err = st.Delete(ctx, historyPath(id), metadata.AnyVersion)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("schema %s: delete history node: %w", id, err)
	}
	return nil
}
