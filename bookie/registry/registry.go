// Package registry is where running bookies announce themselves in the
// cluster's metadata store and where clients find them: one ephemeral node
// per bookie under AvailablePath, holding its Registration as JSON. Bookie
// servers publish with Register; ledger clients, the auditor and the admin
// API read with Bookies and watch AvailablePath. It imports neither the
// bookie server nor the ledger client, so both can depend on it.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// AvailablePath is the metadata directory of registered bookies: one
// ephemeral node per running bookie, named by its id, holding a
// Registration. Ledger clients pick ensembles from it (writable ones) and
// watch it to notice bookies that leave.
const AvailablePath = "/bookies/available"

// Registration is what a running bookie publishes about itself.
type Registration struct {
	BookieID string `json:"bookieId"`
	Address  string `json:"address"` // bookie protocol, host:port ("" when the plaintext port is off)
	// TLSAddress is the bookie protocol over TLS, host:port (bookiePortTls;
	// "" without it). It plays the part of BookKeeper's BookieServiceInfo
	// endpoint with the "tls" extension: clients that use TLS dial it.
	TLSAddress  string `json:"tlsAddress,omitempty"`
	HTTPAddress string `json:"httpAddress,omitempty"` // metrics and status
	Rack        string `json:"rack,omitempty"`        // for rack-aware placement
	Region      string `json:"region,omitempty"`      // for region-aware placement
	ReadOnly    bool   `json:"readOnly"`
	// ReadOnlyReason says why a read-only bookie is (bookie.Core.ReadOnly);
	// it starts with bookie.OutOfSpaceReason when a disk is full.
	ReadOnlyReason string `json:"readOnlyReason,omitempty"`
	// OutOfSpace: read-only because a disk is full (it turns writable by
	// itself once space is freed), not because its storage failed.
	OutOfSpace bool      `json:"outOfSpace,omitempty"`
	Since      time.Time `json:"since"`
}

// Registrar keeps a bookie's registration node current: created at start,
// rewritten when read-only mode changes, deleted at stop. The node is
// ephemeral, so it disappears with the metadata session if the bookie dies.
type Registrar struct {
	store metadata.Store
	log   *slog.Logger
	path  string

	mu  sync.Mutex // serializes updates, in mode-change order
	reg Registration
}

// Register publishes reg. If a node with this id exists, it is either a
// live bookie with the same id (a configuration error) or the node of this
// bookie's previous process, which lingers until its metadata session
// expires (after a kill -9 or a crash). Register waits for it to go until
// ctx ends, then fails naming the conflict: give ctx a deadline somewhat
// past the session timeout.
func Register(ctx context.Context, store metadata.Store, reg Registration, log *slog.Logger) (*Registrar, error) {
	r := &Registrar{store: store, log: log, path: AvailablePath + "/" + reg.BookieID, reg: reg}
	r.reg.Since = time.Now().UTC()
	b, _ := json.Marshal(r.reg)
	logged := false
	for {
		_, _, err := store.Create(ctx, r.path, b, metadata.CreateOptions{Ephemeral: true})
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, metadata.ErrExists) {
			return nil, fmt.Errorf("bookie: register %s: %w", reg.BookieID, err)
		}
		if !logged {
			log.Warn("bookie registration exists; waiting for the previous session to expire", "path", r.path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bookie: %s is already registered at %s: another bookie with this id is running, "+
				"or its previous process's session has not expired: %w", reg.BookieID, r.path, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// SetReadOnly republishes the registration with the new mode.
func (r *Registrar) SetReadOnly(ctx context.Context, ro bool) error {
	return r.SetMode(ctx, ro, "", false)
}

// SetMode republishes the registration with the new mode, why it is
// read-only and whether for lack of space (bookie.Core.ReadOnly and
// bookie.Core.OutOfSpace).
func (r *Registrar) SetMode(ctx context.Context, ro bool, why string, outOfSpace bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reg.ReadOnly, r.reg.ReadOnlyReason, r.reg.OutOfSpace = ro, why, outOfSpace && ro
	if !ro {
		r.reg.ReadOnlyReason = ""
	}
	b, _ := json.Marshal(r.reg)
	if _, err := r.store.Put(ctx, r.path, b, -1); err != nil {
		return fmt.Errorf("bookie: update registration of %s (read-only=%v): %w", r.reg.BookieID, ro, err)
	}
	return nil
}

// Unregister removes the node (a clean stop: clients notice at once).
func (r *Registrar) Unregister(ctx context.Context) error {
	err := r.store.Delete(ctx, r.path, -1)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("bookie: unregister %s: %w", r.reg.BookieID, err)
	}
	return nil
}

// Bookies lists the registered bookies.
func Bookies(ctx context.Context, store metadata.Store) ([]Registration, error) {
	names, err := store.Children(ctx, AvailablePath)
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bookie: list %s: %w", AvailablePath, err)
	}
	var out []Registration
	for _, n := range names {
		b, _, err := store.Get(ctx, AvailablePath+"/"+n)
		if errors.Is(err, metadata.ErrNotFound) {
			continue // left meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("bookie: read registration %s: %w", n, err)
		}
		var reg Registration
		if err := json.Unmarshal(b, &reg); err != nil {
			return nil, fmt.Errorf("bookie: registration %s is not valid JSON: %w", n, err)
		}
		out = append(out, reg)
	}
	return out, nil
}
