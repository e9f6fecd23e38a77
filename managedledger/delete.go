package managedledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/magnetar-io/magnetar/metadata"
)

// Deleter is a factory that can delete a managed ledger for good, with
// its cursors and the ledgers of both (topic deletion).
type Deleter interface {
	// Delete closes the managed ledger if it is open and removes it; a
	// later Open creates a new, empty one. ErrNotFound if there is none.
	Delete(ctx context.Context, name string) error
}

// ErrNotFound: no managed ledger by that name is stored.
var ErrNotFound = errors.New("managedledger: not found")

var (
	_ Deleter = (*BKFactory)(nil)
	_ Deleter = (*MemoryFactory)(nil)
)

// Delete implements Deleter. Metadata goes before ledgers: a crash in
// between leaves orphaned ledgers (space, logged by name) rather than a
// managed ledger whose metadata names ledgers that no longer exist. The
// managed ledger's node is deleted at the version read, so a broker that
// took the topic over meanwhile makes the delete fail instead of losing
// its writes; an old owner still writing finds its node gone on its next
// metadata update and stops (lostOwnership).
func (f *BKFactory) Delete(ctx context.Context, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	release, err := f.claim(ctx, name)
	if err != nil {
		return err
	}
	defer release()
	ledgers, err := f.deleteMetadata(ctx, name)
	if err != nil {
		return err
	}
	for _, lm := range ledgers {
		if err := f.deleteLedgerCopies(ctx, name, lm); err != nil {
			f.log.Warn("managed ledger deleted, but not one of its ledgers: it stays until deleted by hand",
				"managed_ledger", name, "ledger", lm.ID, "err", err)
		}
	}
	f.log.Info("managed ledger deleted", "managed_ledger", name, "ledgers", len(ledgers))
	return nil
}

// claim closes name if it is open here and holds its open slot, so that
// no Open runs until release. It waits for opens and closes in progress.
func (f *BKFactory) claim(ctx context.Context, name string) (release func(), err error) {
	for {
		f.mu.Lock()
		ml, ch := f.open[name], f.opening[name]
		if ml == nil && ch == nil {
			mine := make(chan struct{})
			f.opening[name] = mine
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.opening, name)
				close(mine)
				f.mu.Unlock()
			}, nil
		}
		f.mu.Unlock()
		if ml != nil {
			if err := ml.Close(ctx); err != nil {
				return nil, fmt.Errorf("managedledger: delete %s: close: %w", name, err)
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("managedledger: delete %s: %w", name, ctx.Err())
		}
	}
}

// deleteMetadata removes the cursors' nodes, then the managed ledger's,
// and returns every ledger they named (cursor ledgers as bare ids).
func (f *BKFactory) deleteMetadata(ctx context.Context, name string) ([]ledgerMeta, error) {
	raw, st, err := f.cfg.Store.Get(ctx, mlPath(name))
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, fmt.Errorf("managedledger: delete %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("managedledger: delete %s: %w", name, err)
	}
	var md mlMetadata
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("managedledger: delete %s: metadata at %s is not a managed ledger: %w", name, mlPath(name), err)
	}
	ledgers := append([]ledgerMeta(nil), md.Ledgers...)
	cursorLedgers, err := f.deleteCursorNodes(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := f.cfg.Store.Delete(ctx, mlPath(name), st.Version); err != nil {
		return nil, fmt.Errorf("managedledger: delete %s: %w", name, err)
	}
	for _, id := range cursorLedgers {
		ledgers = append(ledgers, ledgerMeta{ID: id})
	}
	return ledgers, nil
}

// deleteCursorNodes removes every cursor node of name and returns their
// cursor ledgers.
func (f *BKFactory) deleteCursorNodes(ctx context.Context, name string) ([]int64, error) {
	kids, err := f.cfg.Store.Children(ctx, mlPath(name))
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return nil, fmt.Errorf("managedledger: delete %s: list cursors: %w", name, err)
	}
	var ids []int64
	for _, cursor := range kids {
		p := mlPath(name) + "/" + cursor // the node as listed, already escaped
		raw, st, err := f.cfg.Store.Get(ctx, p)
		if errors.Is(err, metadata.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("managedledger: delete %s: cursor %s: %w", name, cursor, err)
		}
		var node cursorNode
		if json.Unmarshal(raw, &node) == nil && node.CursorLedger > 0 {
			ids = append(ids, node.CursorLedger)
		}
		if err := f.cfg.Store.Delete(ctx, p, st.Version); err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return nil, fmt.Errorf("managedledger: delete %s: cursor %s: %w", name, cursor, err)
		}
	}
	return ids, nil
}

// Delete implements Deleter: the ledger's entries and cursors are gone;
// an open handle is closed (its pending reads fail with ErrClosed).
func (f *MemoryFactory) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	ml, ok := f.ledgers[name]
	delete(f.ledgers, name)
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("managedledger: delete %s: %w", name, ErrNotFound)
	}
	ml.closeFor(nil)
	return nil
}
