package registry

// The bookie rack map, as Pulsar keeps it (BookieRackAffinityMapping,
// BookiesRackConfiguration): the data of the node RackMapPath ("/bookies",
// the parent of AvailablePath) is one JSON object of groups, each mapping
// a bookie ("host:port", its id) to where it stands:
//
//	{"default": {"10.0.0.1:3181": {"rack": "/eu-west/rack1", "hostname": "bk1.example"}},
//	 "isolated": {"10.0.0.9:3181": {"rack": "/us-east/rack2"}}}
//
// A rack is a network location "/region/rack" (the region-aware policy
// reads the region from its first segment) or "/rack". A bookie the map
// does not name keeps what it registered (its --region/--rack flags).
// Ledger clients watch the node, so a change applies to the next ensemble
// they choose; existing ensembles stay where they are until a bookie of
// theirs fails or re-replication moves them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/magnetar-io/magnetar/metadata"
)

// RackMapPath is the node holding the rack map (Pulsar's
// BookieRackAffinityMapping.BOOKIE_INFO_ROOT_PATH).
const RackMapPath = "/bookies"

// DefaultRackGroup is the group Pulsar's admin API writes to when none is
// given.
const DefaultRackGroup = "default"

// Default network location parts of a bookie that has none (BookKeeper's
// NetworkTopology.DEFAULT_REGION and DEFAULT_RACK).
const (
	DefaultRegion = "default-region"
	DefaultRack   = "default-rack"
)

// RackInfo is Pulsar's BookieInfo: where one bookie stands.
type RackInfo struct {
	Rack     string `json:"rack"`
	Hostname string `json:"hostname,omitempty"`
}

// RackMap is Pulsar's BookiesRackConfiguration: group -> bookie -> info.
type RackMap map[string]map[string]RackInfo

// Lookup finds a bookie in any group ("default" first, then by name).
func (m RackMap) Lookup(bookie string) (RackInfo, string, bool) {
	if info, ok := m[DefaultRackGroup][bookie]; ok {
		return info, DefaultRackGroup, true
	}
	groups := make([]string, 0, len(m))
	for g := range m {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if info, ok := m[g][bookie]; ok {
			return info, g, true
		}
	}
	return RackInfo{}, "", false
}

// Groups lists the groups a bookie is in.
func (m RackMap) Groups(bookie string) []string {
	var out []string
	for g, bookies := range m {
		if _, ok := bookies[bookie]; ok {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

// ParseLocation splits a network location into its region and rack:
// "/eu/r1" is region "eu", rack "r1"; "/r1" (or "r1") is rack "r1" with no
// region. Deeper paths keep everything after the region as the rack.
func ParseLocation(loc string) (region, rack string) {
	parts := strings.SplitN(strings.Trim(loc, "/"), "/", 2)
	if len(parts) == 2 {
		return parts[0], parts[1]
	}
	return "", parts[0]
}

// Location is the network location "/region/rack", with BookKeeper's
// defaults for a missing part.
func Location(region, rack string) string {
	if region == "" {
		region = DefaultRegion
	}
	if rack == "" {
		rack = DefaultRack
	}
	return "/" + region + "/" + rack
}

// ValidateLocation checks a rack as the admin API takes it.
func ValidateLocation(loc string) error {
	if !strings.HasPrefix(loc, "/") || strings.HasSuffix(loc, "/") || strings.Contains(loc, "//") || len(loc) < 2 {
		return fmt.Errorf("rack %q: want a network location /region/rack or /rack", loc)
	}
	return nil
}

// ReadRackMap reads the rack map and its node's version (-1 and an empty
// map when the node is absent or empty).
func ReadRackMap(ctx context.Context, store metadata.Store) (RackMap, int64, error) {
	b, st, err := store.Get(ctx, RackMapPath)
	if errors.Is(err, metadata.ErrNotFound) {
		return RackMap{}, -1, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("bookie: read rack map %s: %w", RackMapPath, err)
	}
	m := RackMap{}
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, 0, fmt.Errorf("bookie: rack map %s is not valid JSON: %w", RackMapPath, err)
		}
	}
	return m, st.Version, nil
}

// UpdateRackMap changes the rack map with modify by compare-and-set,
// retrying on concurrent changes (bounded). Empty groups are dropped.
func UpdateRackMap(ctx context.Context, store metadata.Store, modify func(RackMap) error) (RackMap, error) {
	for range 16 {
		m, version, err := ReadRackMap(ctx, store)
		if err != nil {
			return nil, err
		}
		if err := modify(m); err != nil {
			return nil, err
		}
		for g, bookies := range m {
			if len(bookies) == 0 {
				delete(m, g)
			}
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		if version < 0 {
			_, _, err = store.Create(ctx, RackMapPath, b, metadata.CreateOptions{})
			if errors.Is(err, metadata.ErrExists) {
				continue // the node appeared (an empty parent, or a racing writer)
			}
		} else {
			_, err = store.Put(ctx, RackMapPath, b, version)
			if errors.Is(err, metadata.ErrBadVersion) {
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("bookie: write rack map %s: %w", RackMapPath, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("bookie: rack map %s: too many concurrent changes", RackMapPath)
}
