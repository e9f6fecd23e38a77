package metadata

import "context"

// Syncer is implemented by a Store whose reads may lag behind writes made
// through other sessions: a ZooKeeper session served by a follower that
// has not applied the leader's latest writes yet. After Sync returns, the
// store's reads see every write completed before Sync was called. Stores
// whose reads are always current (memory, local) do not implement it.
type Syncer interface {
	Sync(ctx context.Context, path string) error
}

// Sync catches store up (Syncer.Sync) if its reads may lag, so that the
// next read of path is current; otherwise it does nothing. Call it before
// a read whose stale answer would do harm: deciding from "not found" that
// something was deleted, when it may just not have reached this server.
// A wrapper that embeds a Syncer's Store must implement Syncer itself.
func Sync(ctx context.Context, store Store, path string) error {
	if s, ok := store.(Syncer); ok {
		return s.Sync(ctx, path)
	}
	return nil
}
