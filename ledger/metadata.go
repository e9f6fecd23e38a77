package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

// State is a ledger's lifecycle state.
type State string

// States, as BookKeeper's.
const (
	StateOpen       State = "OPEN"
	StateInRecovery State = "IN_RECOVERY"
	StateClosed     State = "CLOSED"
)

// Fragment is a run of entries written to one ensemble.
type Fragment struct {
	FirstEntry int64    `json:"firstEntry"`
	Bookies    []string `json:"bookies"`
}

// Metadata is a ledger's metadata as stored (JSON, format version 1).
type Metadata struct {
	FormatVersion   int               `json:"formatVersion"`
	EnsembleSize    int               `json:"ensembleSize"`
	WriteQuorumSize int               `json:"writeQuorumSize"`
	AckQuorumSize   int               `json:"ackQuorumSize"`
	State           State             `json:"state"`
	LastEntryID     int64             `json:"lastEntryId"` // meaningful once CLOSED; -1: no entries
	Length          int64             `json:"length"`
	DigestType      DigestType        `json:"digestType"`
	Password        []byte            `json:"password"`
	Ensembles       []Fragment        `json:"ensembles"`
	CreatedMillis   int64             `json:"ctime"`
	Custom          map[string][]byte `json:"customMetadata,omitempty"`
}

const metadataFormatVersion = 1

// ensembleAt returns the fragment that holds entry.
func (m *Metadata) ensembleAt(entry int64) Fragment {
	f := m.Ensembles[0]
	for _, e := range m.Ensembles[1:] {
		if e.FirstEntry > entry {
			break
		}
		f = e
	}
	return f
}

// fragmentEnd returns the last entry of the fragment that holds entry
// (math.MaxInt64 in the last fragment).
func (m *Metadata) fragmentEnd(entry int64) int64 {
	for _, f := range m.Ensembles {
		if f.FirstEntry > entry {
			return f.FirstEntry - 1
		}
	}
	return math.MaxInt64
}

func (m *Metadata) last() Fragment { return m.Ensembles[len(m.Ensembles)-1] }

func (m *Metadata) clone() *Metadata {
	c := *m
	c.Ensembles = make([]Fragment, len(m.Ensembles))
	for i, f := range m.Ensembles {
		c.Ensembles[i] = Fragment{FirstEntry: f.FirstEntry, Bookies: append([]string(nil), f.Bookies...)}
	}
	return &c
}

func (m *Metadata) validate() error {
	switch {
	case m.FormatVersion != metadataFormatVersion:
		return fmt.Errorf("metadata format version %d, this build reads %d", m.FormatVersion, metadataFormatVersion)
	case m.AckQuorumSize < 1 || m.WriteQuorumSize < m.AckQuorumSize || m.EnsembleSize < m.WriteQuorumSize:
		return fmt.Errorf("quorums E=%d Qw=%d Qa=%d do not satisfy E >= Qw >= Qa >= 1", m.EnsembleSize, m.WriteQuorumSize, m.AckQuorumSize)
	case len(m.Ensembles) == 0:
		return errors.New("no ensembles")
	}
	for i, f := range m.Ensembles {
		if len(f.Bookies) != m.EnsembleSize {
			return fmt.Errorf("fragment %d has %d bookies, ensemble size is %d", i, len(f.Bookies), m.EnsembleSize)
		}
		if i > 0 && f.FirstEntry <= m.Ensembles[i-1].FirstEntry {
			return fmt.Errorf("fragment %d starts at entry %d, not after the previous one (%d)", i, f.FirstEntry, m.Ensembles[i-1].FirstEntry)
		}
	}
	return nil
}

// LedgersPath is the root of ledger metadata in the store.
const LedgersPath = "/ledgers"

// idGenPath holds the next ledger id (decimal), advanced by CAS.
const idGenPath = LedgersPath + "/idgen"

// Path is where a ledger's metadata lives: the 19-digit id split into
// levels of four digits, so no node has more than 10,000 children.
func Path(id int64) string {
	s := fmt.Sprintf("%019d", id)
	return LedgersPath + "/L/" + s[0:3] + "/" + s[3:7] + "/" + s[7:11] + "/" + s[11:15] + "/L" + s
}

// metaStore reads and writes ledger metadata.
type metaStore struct{ store metadata.Store }

// nextID allocates a ledger id unique in the cluster (ids are never
// reused, which garbage collection relies on).
func (s metaStore) nextID(ctx context.Context) (int64, error) {
	for {
		b, st, err := s.store.Get(ctx, idGenPath)
		next, ver := int64(1), int64(-1)
		switch {
		case errors.Is(err, metadata.ErrNotFound):
			if _, _, err := s.store.Create(ctx, idGenPath, []byte("2"), metadata.CreateOptions{}); err == nil {
				return 1, nil
			} else if !errors.Is(err, metadata.ErrExists) {
				return 0, fmt.Errorf("ledger id: %w", err)
			}
			continue
		case err != nil:
			return 0, fmt.Errorf("ledger id: %w", err)
		}
		if next, err = strconv.ParseInt(string(b), 10, 64); err != nil || next < 1 {
			return 0, fmt.Errorf("ledger id: %s holds %q, not a positive integer", idGenPath, b)
		}
		ver = st.Version
		_, err = s.store.Put(ctx, idGenPath, []byte(strconv.FormatInt(next+1, 10)), ver)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, metadata.ErrBadVersion) {
			return 0, fmt.Errorf("ledger id: %w", err)
		}
	}
}

func (s metaStore) create(ctx context.Context, id int64, m *Metadata) (int64, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	_, st, err := s.store.Create(ctx, Path(id), b, metadata.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("create metadata of ledger %d: %w", id, err)
	}
	return st.Version, nil
}

func (s metaStore) read(ctx context.Context, id int64) (*Metadata, int64, error) {
	b, st, err := s.store.Get(ctx, Path(id))
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, 0, fmt.Errorf("ledger %d: %w", id, ErrNoSuchLedger)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read metadata of ledger %d: %w", id, err)
	}
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, 0, fmt.Errorf("metadata of ledger %d is not valid JSON: %w", id, err)
	}
	if err := m.validate(); err != nil {
		return nil, 0, fmt.Errorf("metadata of ledger %d: %w", id, err)
	}
	return &m, st.Version, nil
}

// write stores m if the stored version is still version; it returns the
// new version, or metadata.ErrBadVersion.
func (s metaStore) write(ctx context.Context, id int64, m *Metadata, version int64) (int64, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	st, err := s.store.Put(ctx, Path(id), b, version)
	if err != nil {
		return 0, fmt.Errorf("update metadata of ledger %d: %w", id, err)
	}
	return st.Version, nil
}

func (s metaStore) remove(ctx context.Context, id int64) error {
	err := s.store.Delete(ctx, Path(id), -1)
	if errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("ledger %d: %w", id, ErrNoSuchLedger)
	}
	return err
}

func nowMillis() int64 { return time.Now().UnixMilli() }
