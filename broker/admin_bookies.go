package broker

// The bookie registry of the admin API (admin.Bookies): the
// registrations under registry.AvailablePath and the rack map at
// registry.RackMapPath in the cluster's metadata store
// (Config.ClusterMetadata), as the ledger client reads them. Without that
// store the calls are refused (412).

import (
	"context"
	"fmt"
	"sort"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/metadata"
)

// Bookies lists every registered bookie, writable and read-only, sorted
// by id (admin.Bookies).
func (b *Broker) Bookies(ctx context.Context) ([]admin.BookieInfo, error) {
	store := b.cfg.ClusterMetadata
	if store == nil {
		return nil, admin.Errorf(resources.ErrPrecondition,
			"this broker has no cluster metadata store, so no bookie registry (its topics are not stored on bookies)")
	}
	regs, err := registry.Bookies(ctx, store)
	if err != nil {
		return nil, err
	}
	out := make([]admin.BookieInfo, 0, len(regs))
	for _, reg := range regs {
		item := admin.BookieInfo{BookieID: reg.BookieID, ReadOnly: reg.ReadOnly}
		if reg.ReadOnly {
			item.Reason, item.OutOfSpace = reg.ReadOnlyReason, reg.OutOfSpace
		}
		out = append(out, item)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BookieID < out[j].BookieID })
	return out, nil
}

// clusterStore is the cluster metadata store the bookie registry and rack
// map are in (412 without one).
func (b *Broker) clusterStore() (metadata.Store, error) {
	if b.cfg.ClusterMetadata == nil {
		return nil, admin.Errorf(resources.ErrPrecondition,
			"this broker has no cluster metadata store, so no bookie registry or rack map (its topics are not stored on bookies)")
	}
	return b.cfg.ClusterMetadata, nil
}

// RacksInfo reads the bookie rack map (admin.Bookies).
func (b *Broker) RacksInfo(ctx context.Context) (admin.BookiesRackConfiguration, error) {
	store, err := b.clusterStore()
	if err != nil {
		return nil, err
	}
	m, _, err := registry.ReadRackMap(ctx, store)
	if err != nil {
		return nil, err
	}
	out := admin.BookiesRackConfiguration{}
	for g, bookies := range m {
		out[g] = map[string]admin.BookieRackInfo{}
		for id, info := range bookies {
			out[g][id] = admin.BookieRackInfo{Rack: info.Rack, Hostname: info.Hostname}
		}
	}
	return out, nil
}

// SetBookieRack puts bookie in group with info, out of any other group
// (admin.Bookies).
func (b *Broker) SetBookieRack(ctx context.Context, bookie, group string, info admin.BookieRackInfo) error {
	store, err := b.clusterStore()
	if err != nil {
		return err
	}
	_, err = registry.UpdateRackMap(ctx, store, func(m registry.RackMap) error {
		for _, bookies := range m {
			delete(bookies, bookie)
		}
		if m[group] == nil {
			m[group] = map[string]registry.RackInfo{}
		}
		m[group][bookie] = registry.RackInfo{Rack: info.Rack, Hostname: info.Hostname}
		return nil
	})
	return err
}

// DeleteBookieRack removes bookie from every group (admin.Bookies).
func (b *Broker) DeleteBookieRack(ctx context.Context, bookie string) error {
	store, err := b.clusterStore()
	if err != nil {
		return err
	}
	_, err = registry.UpdateRackMap(ctx, store, func(m registry.RackMap) error {
		found := false
		for _, bookies := range m {
			if _, ok := bookies[bookie]; ok {
				delete(bookies, bookie)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("bookie %s has no rack placement: %w", bookie, resources.ErrNotFound)
		}
		return nil
	})
	return err
}
