package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/metadata"
)

// modeSource is what announceBookie needs of a bookie: *bookie.Core.
type modeSource interface {
	ReadOnly() (bool, string)
	OutOfSpace() bool
	OnModeChange(fn func(readOnly bool))
}

// bookieAnnouncer keeps a bookie's registration in step with its
// read-only mode, so ledger clients stop placing ensembles on a bookie
// whose disk is full and use it again once it is writable. Shared by
// magnetar bookie and standalone's in-process bookie.
//
// The mode is published from a goroutine of its own: the core calls its
// listener on the goroutine that changed the mode (an add, the journal,
// the disk checker), which must not wait for a metadata write. Changes
// coalesce, and each publish reads the mode current at that moment, so
// the last one published is always the bookie's latest mode.
type bookieAnnouncer struct {
	reg    *registry.Registrar
	core   modeSource
	log    *slog.Logger
	kick   chan struct{} // buffered 1: a mode change to publish
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// announceRetry bounds the wait between attempts to publish a mode change
// the metadata store refused.
const announceRetry = 5 * time.Second

// announceBookie registers reg with the core's current mode and publishes
// every later change until Unregister.
func announceBookie(ctx context.Context, store metadata.Store, core modeSource, reg registry.Registration, log *slog.Logger) (*bookieAnnouncer, error) {
	reg.ReadOnly, reg.ReadOnlyReason = core.ReadOnly()
	reg.OutOfSpace = reg.ReadOnly && core.OutOfSpace()
	r, err := registry.Register(ctx, store, reg, log)
	if err != nil {
		return nil, err
	}
	a := &bookieAnnouncer{reg: r, core: core, log: log.With("bookie", reg.BookieID),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	core.OnModeChange(func(bool) { a.changed() })
	if ro, _ := core.ReadOnly(); ro != reg.ReadOnly {
		a.changed() // changed between Register and OnModeChange
	}
	go a.run(reg.ReadOnly)
	return a, nil
}

func (a *bookieAnnouncer) changed() {
	select {
	case a.kick <- struct{}{}:
	default: // one is pending: it will read the latest mode
	}
}

// run publishes each mode change, retrying one the store refused.
func (a *bookieAnnouncer) run(published bool) {
	defer close(a.done)
	retry := time.Duration(0)
	for {
		var wait <-chan time.Time
		if retry > 0 {
			wait = time.After(retry)
		}
		select {
		case <-a.stop:
			return
		case <-a.kick:
		case <-wait:
		}
		ro, why := a.core.ReadOnly()
		if ro == published {
			retry = 0 // back to what the store holds: nothing to publish
			continue
		}
		if err := a.publish(ro, why); err != nil {
			retry = min(max(2*retry, 100*time.Millisecond), announceRetry)
			a.log.Error("bookie could not publish its mode; retrying", "read_only", ro, "retry_in", retry, "err", err)
			continue
		}
		published, retry = ro, 0
		a.log.Info("bookie mode published", "read_only", ro, "why", why)
	}
}

// publish writes the mode with why it is read-only and whether for lack of
// space, which clients pass on to producers ("out of disk space").
func (a *bookieAnnouncer) publish(ro bool, why string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.reg.SetMode(ctx, ro, why, a.core.OutOfSpace()); err != nil {
		return fmt.Errorf("publish read-only=%v: %w", ro, err)
	}
	return nil
}

// Unregister stops publishing and removes the registration (a clean stop:
// clients notice at once).
func (a *bookieAnnouncer) Unregister(ctx context.Context) error {
	a.closed.Do(func() {
		a.core.OnModeChange(func(bool) {})
		close(a.stop)
		<-a.done
	})
	return a.reg.Unregister(ctx)
}
