package managedledger

// Tiered storage (Pulsar's ledger offload): closed ledgers are copied to
// an offloader (managedledger/offload) and, after a deletion lag, deleted
// from the bookies. Behavior:
//   - A ledger's offload state is part of its entry in the managed
//     ledger's node ("offload": uid, driver, complete, bookkeeperDeleted,
//     timestamp), changed by the owner's compare-and-set writes as the
//     ledger list is. The uid is stored before the copy starts, so a copy
//     a crash left half-written is found and deleted by the next attempt.
//   - Once complete, the ledger is read from the offloaded copy (also
//     before its bookie copy is deleted, as Pulsar does): the copy is
//     what readers will rely on, so it is what they use from the start.
//   - The current ledger is never offloaded. A trimmed ledger's copy is
//     deleted with it, as is every copy when the managed ledger is.
//   - Offload is asked for by the owner: OffloadPrefix (the admin API's
//     offload up to a message) or OffloadByPolicy (thresholds of bytes
//     kept on the bookies or of age, and the deletion lag), which the
//     broker runs on every retention check.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/managedledger/offload"
)

// offloadMeta is a ledger's offload state, stored in its ledger entry.
type offloadMeta struct {
	UID               string `json:"uid"`
	Driver            string `json:"driver"`
	Complete          bool   `json:"complete"`
	BookkeeperDeleted bool   `json:"bookkeeperDeleted,omitempty"`
	Timestamp         int64  `json:"timestamp,omitempty"` // unix ms the copy completed
}

// OffloadPolicy is one managed ledger's offload settings (Pulsar's
// OffloadPolicies and the namespace's offload_threshold,
// offload_threshold_in_seconds and offload_deletion_lag_ms).
type OffloadPolicy struct {
	// Driver names the offloader (Pulsar's managedLedgerOffloadDriver).
	Driver string
	// ThresholdBytes keeps this many bytes of the newest closed ledgers
	// on the bookies and offloads older ones (negative: off; 0: offload
	// every closed ledger).
	ThresholdBytes int64
	// ThresholdAge offloads closed ledgers older than this (negative: off).
	ThresholdAge time.Duration
	// DeletionLag deletes an offloaded ledger's bookie copy this long
	// after its copy completed (negative: never).
	DeletionLag time.Duration
}

// Offloadable is a managed ledger whose closed ledgers can go to tiered
// storage (the ledger-backed one, with an offloader configured).
type Offloadable interface {
	// OffloadPrefix offloads, with driver, every closed ledger before the
	// ledger of upTo (all closed ones when upTo is past the last entry),
	// oldest first, and answers the first position not offloaded.
	OffloadPrefix(ctx context.Context, driver string, upTo Position) (Position, error)
	// OffloadByPolicy offloads what p's thresholds ask for and deletes
	// the bookie copies p's deletion lag lets go.
	OffloadByPolicy(ctx context.Context, p OffloadPolicy) error
	// Offloaded reports each ledger's offload state, by ledger id.
	Offloaded() map[int64]bool
	// FirstNotOffloaded is the first entry of the oldest ledger not
	// offloaded (the next position to write when all are).
	FirstNotOffloaded() Position
	// OffloadedSize is the bytes of the ledgers whose copies are complete
	// (Pulsar's pulsar_storage_offloaded_size).
	OffloadedSize() int64
}

var _ Offloadable = (*bkLedger)(nil)

// ErrOffloadUnavailable: no offloader is configured for the driver.
var ErrOffloadUnavailable = errors.New("managedledger: tiered storage offload is not configured")

// offloader returns the factory's offloader for driver, built once.
func (f *BKFactory) offloader(driver string) (offload.Offloader, error) {
	if f.cfg.Offload == nil {
		return nil, fmt.Errorf("%w (set managedLedgerOffloadDriver)", ErrOffloadUnavailable)
	}
	if driver == "" {
		driver = f.cfg.Offload.Driver
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.offloaders[driver]; ok {
		return o, nil
	}
	o, err := offload.New(driver, f.cfg.Offload.Config)
	if err != nil {
		return nil, err
	}
	if w := f.cfg.Offload.Wrap; w != nil {
		o = w(o)
	}
	if f.offloaders == nil {
		f.offloaders = map[string]offload.Offloader{}
	}
	f.offloaders[driver] = o
	return o, nil
}

func offloadKey(name string, id int64, m *offloadMeta) offload.Key {
	return offload.Key{ManagedLedger: name, LedgerID: id, UID: m.UID}
}

// OffloadPrefix implements Offloadable.
func (ml *bkLedger) OffloadPrefix(ctx context.Context, driver string, upTo Position) (Position, error) {
	ml.offloadMu.Lock()
	defer ml.offloadMu.Unlock()
	for _, id := range ml.offloadCandidates(func(l *ledgerInfo, _ int64) bool { return l.meta.ID < upTo.LedgerID }) {
		if err := ml.offloadLedger(ctx, driver, id); err != nil {
			return ml.FirstNotOffloaded(), err
		}
	}
	return ml.FirstNotOffloaded(), nil
}

// OffloadByPolicy implements Offloadable.
func (ml *bkLedger) OffloadByPolicy(ctx context.Context, p OffloadPolicy) error {
	if !ml.offloadMu.TryLock() {
		return nil // an offload runs: the next check goes on
	}
	defer ml.offloadMu.Unlock()
	now := time.Now()
	due := func(l *ledgerInfo, bytesFromNewest int64) bool {
		old := p.ThresholdAge >= 0 && l.meta.Timestamp > 0 && now.Sub(time.UnixMilli(l.meta.Timestamp)) >= p.ThresholdAge
		return old || (p.ThresholdBytes >= 0 && bytesFromNewest > p.ThresholdBytes)
	}
	var errs []error
	for _, id := range ml.offloadCandidates(due) {
		if err := ml.offloadLedger(ctx, p.Driver, id); err != nil {
			errs = append(errs, err)
			break // in order: a later ledger never goes before an earlier one
		}
	}
	if p.DeletionLag >= 0 {
		errs = append(errs, ml.deleteOffloadedFromBookies(ctx, now, p.DeletionLag))
	}
	return errors.Join(errs...)
}

// offloadCandidates are the closed ledgers, oldest first, not yet
// offloaded for which want holds; want is given the ledger and the bytes
// of the closed ledgers newer than it plus its own.
func (ml *bkLedger) offloadCandidates(want func(l *ledgerInfo, bytesFromNewest int64) bool) []int64 {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	closed := ml.mu.ledgers[:max(len(ml.mu.ledgers)-1, 0)]
	fromNewest := make([]int64, len(closed))
	var sum int64
	for k := len(closed) - 1; k >= 0; k-- {
		sum += closed[k].meta.Size
		fromNewest[k] = sum
	}
	var ids []int64
	for k, l := range closed {
		if o := l.meta.Offload; (o == nil || !o.Complete) && want(l, fromNewest[k]) {
			ids = append(ids, l.meta.ID)
		}
	}
	return ids
}

// FirstNotOffloaded implements Offloadable.
func (ml *bkLedger) FirstNotOffloaded() Position {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	for _, l := range ml.mu.ledgers {
		if o := l.meta.Offload; o == nil || !o.Complete {
			return Position{l.meta.ID, 0}
		}
	}
	return ml.positionLocked(ml.endLocked())
}

// Offloaded implements Offloadable.
func (ml *bkLedger) Offloaded() map[int64]bool {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	out := make(map[int64]bool, len(ml.mu.ledgers))
	for _, l := range ml.mu.ledgers {
		out[l.meta.ID] = l.meta.Offload != nil && l.meta.Offload.Complete
	}
	return out
}

// OffloadedSize implements Offloadable.
func (ml *bkLedger) OffloadedSize() int64 {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	var n int64
	for _, l := range ml.mu.ledgers {
		if o := l.meta.Offload; o != nil && o.Complete {
			n += l.meta.Size
		}
	}
	return n
}

// offloadLedger copies one closed ledger: its uid is stored first, then
// the copy is made, then it is marked complete.
func (ml *bkLedger) offloadLedger(ctx context.Context, driver string, id int64) error {
	off, err := ml.f.offloader(driver)
	if err != nil {
		return fmt.Errorf("offload ledger %d: %w", id, err)
	}
	var stale *offloadMeta
	m := &offloadMeta{UID: newOffloadUID(), Driver: off.Driver()}
	err = ml.updateLedgerMeta(ctx, id, func(lm *ledgerMeta) {
		if lm.Offload != nil && !lm.Offload.Complete {
			stale = lm.Offload
		}
		lm.Offload = m
	})
	if err != nil {
		return fmt.Errorf("offload ledger %d: record its uid: %w", id, err)
	}
	if stale != nil { // a copy an earlier attempt left behind
		if prev, err := ml.f.offloader(stale.Driver); err == nil {
			_ = prev.Delete(ctx, offloadKey(ml.name, id, stale))
		}
	}
	r, err := ml.cfg.Ledgers.OpenNoRecovery(ctx, id, ml.cfg.Password)
	if err == nil {
		err = off.Offload(ctx, offloadKey(ml.name, id, m), map[string]string{
			"ManagedLedgerName": ml.name, "LedgerId": strconv.FormatInt(id, 10)}, r)
	}
	if err != nil {
		_ = off.Delete(ctx, offloadKey(ml.name, id, m))
		return fmt.Errorf("offload ledger %d to %s: %w", id, off.Driver(), err)
	}
	err = ml.updateLedgerMeta(ctx, id, func(lm *ledgerMeta) {
		done := *m
		done.Complete, done.Timestamp = true, time.Now().UnixMilli()
		lm.Offload = &done
	})
	if err != nil {
		return fmt.Errorf("offload ledger %d: mark it complete: %w", id, err)
	}
	ml.f.log.Info("ledger offloaded", "managed_ledger", ml.name, "ledger", id, "driver", off.Driver(), "uid", m.UID)
	return nil
}

// deleteOffloadedFromBookies deletes the bookie copy of every ledger
// whose offloaded copy completed at least lag ago.
func (ml *bkLedger) deleteOffloadedFromBookies(ctx context.Context, now time.Time, lag time.Duration) error {
	ml.mu.Lock()
	var ids []int64
	for _, l := range ml.mu.ledgers {
		if o := l.meta.Offload; o != nil && o.Complete && !o.BookkeeperDeleted && now.Sub(time.UnixMilli(o.Timestamp)) >= lag {
			ids = append(ids, l.meta.ID)
		}
	}
	ml.mu.Unlock()
	for _, id := range ids {
		// Deleted first, then recorded: a crash in between leaves a ledger
		// read from its copy anyway, whose delete the next pass repeats.
		if err := ml.cfg.Ledgers.Delete(ctx, id); err != nil && !errors.Is(err, ledger.ErrNoSuchLedger) {
			return fmt.Errorf("delete offloaded ledger %d from the bookies: %w", id, err)
		}
		err := ml.updateLedgerMeta(ctx, id, func(lm *ledgerMeta) {
			if lm.Offload != nil {
				done := *lm.Offload
				done.BookkeeperDeleted = true
				lm.Offload = &done
			}
		})
		if err != nil {
			return err
		}
		ml.f.log.Info("offloaded ledger deleted from the bookies", "managed_ledger", ml.name, "ledger", id)
	}
	return nil
}

// updateLedgerMeta changes ledger id's entry in the managed ledger's node
// (compare-and-set, as rollovers and trims write it). A ledger trimmed
// meanwhile is left alone.
func (ml *bkLedger) updateLedgerMeta(ctx context.Context, id int64, change func(*ledgerMeta)) error {
	ml.metaMu.Lock()
	defer ml.metaMu.Unlock()
	ml.mu.Lock()
	k := -1
	for i, l := range ml.mu.ledgers {
		if l.meta.ID == id {
			k = i
		}
	}
	if k < 0 || ml.mu.closed || ml.mu.fenced != nil {
		ml.mu.Unlock()
		if k < 0 {
			return nil
		}
		return fmt.Errorf("%s: ledger %d: %w", ml.name, id, ErrClosed)
	}
	next := append([]*ledgerInfo(nil), ml.mu.ledgers...)
	changed := *next[k]
	change(&changed.meta)
	next[k] = &changed
	md, version := ml.metadataLocked(next), ml.mu.version
	ml.mu.Unlock()
	v, err := ml.writeMetadata(ctx, md, version)
	if err != nil {
		return err
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.mu.version = v
	for _, l := range ml.mu.ledgers {
		if l.meta.ID == id {
			l.meta.Offload = changed.meta.Offload
		}
	}
	return nil
}

// offloadReader returns the reader of a ledger's offloaded copy, opening
// it once.
func (ml *bkLedger) offloadReader(ctx context.Context, l *ledgerInfo, m *offloadMeta) (offload.Reader, error) {
	ml.mu.Lock()
	r := l.offReader
	ml.mu.Unlock()
	if r != nil {
		return r, nil
	}
	off, err := ml.f.offloader(m.Driver)
	if err != nil {
		return nil, err
	}
	r, err = off.Open(ctx, offloadKey(ml.name, l.meta.ID, m))
	if err != nil {
		return nil, err
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if l.offReader != nil {
		_ = r.Close()
		return l.offReader, nil
	}
	l.offReader = r
	return r, nil
}

// deleteLedgerCopies deletes a trimmed or deleted ledger from the bookies
// (unless the offload already did) and its offloaded copy, if any.
func (f *BKFactory) deleteLedgerCopies(ctx context.Context, name string, lm ledgerMeta) error {
	var errs []error
	if o := lm.Offload; o != nil {
		off, err := f.offloader(o.Driver)
		if err == nil {
			err = off.Delete(ctx, offloadKey(name, lm.ID, o))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete the offloaded copy of ledger %d: %w", lm.ID, err))
		}
		if o.BookkeeperDeleted {
			return errors.Join(errs...)
		}
	}
	if err := f.cfg.Ledgers.Delete(ctx, lm.ID); err != nil && !errors.Is(err, ledger.ErrNoSuchLedger) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func newOffloadUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
