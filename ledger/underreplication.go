package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/magnetar-io/magnetar/metadata"
)

// Re-replication state in the metadata store (see doc.go, "Re-replication"):
//
//	/ledgers/underreplication/ledgers/<id>  persistent mark: UnderreplicationMark (JSON)
//	/ledgers/underreplication/locks/<id>    ephemeral: the worker replicating <id>
//	/ledgers/auditor/election/candidate-<n> ephemeral sequential: auditor candidates
const (
	underreplicationPath = LedgersPath + "/underreplication"
	// UnderreplicatedPath holds one mark per under-replicated ledger,
	// named by its decimal id.
	UnderreplicatedPath = underreplicationPath + "/ledgers"
	urLocksPath         = underreplicationPath + "/locks"
	// AuditorElectionPath holds the auditor candidates; the lowest
	// sequence number leads.
	AuditorElectionPath = LedgersPath + "/auditor/election"
)

// UnderreplicationMark says that a ledger has replicas on lost bookies.
type UnderreplicationMark struct {
	// MissingBookies are the lost bookies found in the ledger's
	// ensembles, sorted. The auditor adds to them; only a worker that
	// found none of them left in the metadata removes the mark.
	MissingBookies []string `json:"missingBookies"`
	// MisplacedBookies are registered bookies holding replicas that break
	// the placement policy's spread (BookKeeper's placement policy check):
	// a worker moves them to a bookie of a domain the write sets lack,
	// while one is writable.
	MisplacedBookies []string `json:"misplacedBookies,omitempty"`
	// MarkedMillis is when the ledger was first marked (unix ms).
	MarkedMillis int64 `json:"markedMillis"`
}

func markPath(id int64) string { return UnderreplicatedPath + "/" + strconv.FormatInt(id, 10) }
func lockPath(id int64) string { return urLocksPath + "/" + strconv.FormatInt(id, 10) }

// maxCASRetries bounds compare-and-set loops on one node: each retry
// means another writer changed the node meanwhile, and a handful of
// writers (an auditor, a few workers, the ledger's writer) touch any one.
const maxCASRetries = 100

// MarkUnderreplicated records that ledger id has replicas on the missing
// bookies, merging them into an existing mark.
func MarkUnderreplicated(ctx context.Context, store metadata.Store, id int64, missing []string) error {
	return mark(ctx, store, id, missing, nil)
}

// MarkMisplaced records that ledger id has replicas on the misplaced
// bookies (registered, but against the placement policy).
func MarkMisplaced(ctx context.Context, store metadata.Store, id int64, misplaced []string) error {
	return mark(ctx, store, id, nil, misplaced)
}

func mark(ctx context.Context, store metadata.Store, id int64, missing, misplaced []string) error {
	for range maxCASRetries {
		b, st, err := store.Get(ctx, markPath(id))
		if errors.Is(err, metadata.ErrNotFound) {
			m := UnderreplicationMark{MissingBookies: orEmptyList(sortedSet(missing)), MisplacedBookies: sortedSet(misplaced), MarkedMillis: nowMillis()}
			v, _ := json.Marshal(m)
			_, _, err = store.Create(ctx, markPath(id), v, metadata.CreateOptions{})
			if err == nil || !errors.Is(err, metadata.ErrExists) {
				return wrapMarkErr(id, err)
			}
			continue // marked meanwhile: merge into that mark
		}
		if err != nil {
			return wrapMarkErr(id, err)
		}
		m, err := decodeMark(id, b)
		if err != nil {
			return err
		}
		merged := orEmptyList(sortedSet(append(slices.Clone(m.MissingBookies), missing...)))
		mergedMis := sortedSet(append(slices.Clone(m.MisplacedBookies), misplaced...))
		if slices.Equal(merged, m.MissingBookies) && slices.Equal(mergedMis, m.MisplacedBookies) {
			return nil
		}
		m.MissingBookies, m.MisplacedBookies = merged, mergedMis
		v, _ := json.Marshal(m)
		_, err = store.Put(ctx, markPath(id), v, st.Version)
		if err == nil || !errors.Is(err, metadata.ErrBadVersion) {
			return wrapMarkErr(id, err)
		}
	}
	return fmt.Errorf("mark ledger %d under-replicated: %d version conflicts in a row", id, maxCASRetries)
}

func orEmptyList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func wrapMarkErr(id int64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mark ledger %d under-replicated: %w", id, err)
}

// ListUnderreplicated returns the ids of the marked ledgers, sorted.
func ListUnderreplicated(ctx context.Context, store metadata.Store) ([]int64, error) {
	names, err := store.Children(ctx, UnderreplicatedPath)
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list under-replicated ledgers: %w", err)
	}
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("list under-replicated ledgers: %s/%s is not a ledger id", UnderreplicatedPath, n)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// readMark returns a ledger's mark and its version; ErrNotFound (wrapped)
// when the ledger is not marked.
func readMark(ctx context.Context, store metadata.Store, id int64) (UnderreplicationMark, int64, error) {
	b, st, err := store.Get(ctx, markPath(id))
	if err != nil {
		return UnderreplicationMark{}, 0, fmt.Errorf("read under-replication mark of ledger %d: %w", id, err)
	}
	m, err := decodeMark(id, b)
	return m, st.Version, err
}

func decodeMark(id int64, b []byte) (UnderreplicationMark, error) {
	var m UnderreplicationMark
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("under-replication mark of ledger %d is not valid JSON: %w", id, err)
	}
	return m, nil
}

// unmark removes a mark if it is still at version: a mark the auditor
// extended meanwhile names a bookie this worker has not handled.
func unmark(ctx context.Context, store metadata.Store, id, version int64) error {
	err := store.Delete(ctx, markPath(id), version)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("unmark ledger %d: %w", id, err)
	}
	return nil
}

// tryLock takes the replication lock of a ledger: an ephemeral node, so a
// worker that dies releases it with its session. It reports false when
// another worker holds it.
func tryLock(ctx context.Context, store metadata.Store, id int64, owner string) (bool, error) {
	_, _, err := store.Create(ctx, lockPath(id), []byte(owner), metadata.CreateOptions{Ephemeral: true})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, metadata.ErrExists):
		return false, nil
	}
	return false, fmt.Errorf("lock ledger %d for replication: %w", id, err)
}

func unlock(ctx context.Context, store metadata.Store, id int64) error {
	// Version 0: the lock is never rewritten. A session that was lost
	// cannot delete anything, so this never removes another worker's lock.
	err := store.Delete(ctx, lockPath(id), 0)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("unlock ledger %d: %w", id, err)
	}
	return nil
}

// ForEachLedger calls fn with the id of every ledger that has metadata,
// walking the levels of Path; ledgers created or deleted during the walk
// may or may not be seen. It stops at fn's first error.
func ForEachLedger(ctx context.Context, store metadata.Store, fn func(id int64) error) error {
	return walkLedgerLevel(ctx, store, LedgersPath+"/L", 0, fn)
}

// ledgerPathLevels is the number of directory levels under /ledgers/L
// (3, 4, 4 and 4 digits of the id; see Path).
const ledgerPathLevels = 4

func walkLedgerLevel(ctx context.Context, store metadata.Store, dir string, level int, fn func(int64) error) error {
	names, err := store.Children(ctx, dir)
	if errors.Is(err, metadata.ErrNotFound) {
		return nil // no ledgers yet, or this level emptied meanwhile
	}
	if err != nil {
		return fmt.Errorf("list ledgers under %s: %w", dir, err)
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if level < ledgerPathLevels {
			if err := walkLedgerLevel(ctx, store, dir+"/"+n, level+1, fn); err != nil {
				return err
			}
			continue
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(n, "L"), 10, 64)
		if err != nil || !strings.HasPrefix(n, "L") || Path(id) != dir+"/"+n {
			return fmt.Errorf("list ledgers: %s/%s is not a ledger metadata node", dir, n)
		}
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// ReadMetadata returns ledger id's metadata straight from store, for tools
// that have no Client (the bookie shell).
func ReadMetadata(ctx context.Context, store metadata.Store, id int64) (*Metadata, error) {
	md, _, err := metaStore{store}.read(ctx, id)
	return md, err
}
