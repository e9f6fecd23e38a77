package perfledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// cluster is what one point writes to: bookies started for it with their
// metadata server, or a running cluster's store.
type cluster struct {
	meta    *metadata.MemoryServer // nil for a running cluster
	remote  metadata.Store         // the running cluster's store (not ours to close)
	bookies []*localBookie
	counts  *perfkit.Counters
	clients []metadata.Store // sessions handed to ledger clients, closed with the cluster
	dir     string           // the point's directory, removed with the cluster
}

// startCluster starts n bookies under dir, each with its own io backend
// (as separate processes would have), registered in a fresh in-memory
// metadata store.
func startCluster(n int, dir, backend string, storage StorageOpener, log *slog.Logger) (*cluster, error) {
	c := &cluster{meta: metadata.NewMemoryServer(), counts: &perfkit.Counters{}, dir: dir}
	for i := range n {
		b, err := startBookie(c, i, backend, storage, log)
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		c.bookies = append(c.bookies, b)
	}
	return c, nil
}

// session returns a metadata session for a ledger client.
func (c *cluster) session() metadata.Store {
	if c.remote != nil {
		return c.remote
	}
	s := c.meta.NewSession()
	c.clients = append(c.clients, s)
	return s
}

// close stops the bookies and removes the point's directory. Ledger
// clients must be closed first.
func (c *cluster) close() error {
	var errs []error
	for _, s := range c.clients {
		errs = append(errs, s.Close())
	}
	for _, b := range c.bookies {
		errs = append(errs, b.stop())
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	c.clients, c.bookies = nil, nil
	return errors.Join(errs...)
}

// localBookie is an in-process bookie (see perfkit.Bookie) with its own
// io backend, registered under its own metadata session.
type localBookie struct {
	id    string
	fs    engine.FS
	kit   *perfkit.Bookie
	store metadata.Store // the registration's session: closing it unregisters
}

func startBookie(c *cluster, i int, backend string, storage StorageOpener, log *slog.Logger) (*localBookie, error) {
	id := fmt.Sprintf("perf-bookie-%d", i)
	journalDir := filepath.Join(c.dir, id, "journal")
	ledgerDir := filepath.Join(c.dir, id, "ledgers")
	fsys, err := engine.New(engine.Options{Backend: backend, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	b := &localBookie{id: id, fs: fsys}
	if err := b.start(c, journalDir, ledgerDir, storage, log); err != nil {
		return nil, errors.Join(fmt.Errorf("start bookie %s: %w", id, err), b.stop())
	}
	return b, nil
}

func (b *localBookie) start(c *cluster, journalDir, ledgerDir string, storage StorageOpener, log *slog.Logger) error {
	kit, err := perfkit.NewBookie(b.fs, storage, journalDir, ledgerDir, c.counts, log)
	if err != nil {
		return err
	}
	if err := kit.Start(); err != nil {
		return err
	}
	b.kit = kit
	b.store = c.meta.NewSession()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = registry.Register(ctx, b.store, registry.Registration{BookieID: b.id, Address: kit.Addr()}, log)
	return err
}

// stop unregisters the bookie, closes its server, then its core (flushing
// storage and checkpointing the journal), then its io backend.
func (b *localBookie) stop() error {
	var errs []error
	if b.store != nil {
		errs = append(errs, b.store.Close())
	}
	if b.kit != nil {
		errs = append(errs, b.kit.Stop())
	}
	errs = append(errs, b.fs.Close())
	b.store, b.kit = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop bookie %s: %w", b.id, err)
	}
	return nil
}
