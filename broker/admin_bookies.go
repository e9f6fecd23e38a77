package broker

// The bookie registry of the admin API (admin.Bookies): the
// registrations under registry.AvailablePath in the cluster's metadata
// store (Config.ClusterMetadata), as the ledger client reads them.
// Without that store the call is refused (412).

import (
	"context"
	"sort"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
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
