package entrylog

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// The model the crash and error tests check a recovered storage against:
// the acknowledged operations in order, of which all but deletions are in
// the bookie's journal and replayed after a restart.

type opKind int

const (
	opAdd opKind = iota
	opKey
	opFence
	opLAC
	opDelete
)

type op struct {
	kind          opKind
	ledger, entry int64
	data          []byte
}

func (o op) String() string {
	return fmt.Sprintf("%v(%d/%d, %d bytes)", [...]string{"add", "key", "fence", "lac", "delete"}[o.kind],
		o.ledger, o.entry, len(o.data))
}

type ledgerModel struct {
	key     []byte
	fenced  bool
	lac     []byte
	entries map[int64][]byte
}

type stateModel struct {
	ledgers map[int64]*ledgerModel
	deleted map[int64]bool
}

func newModel(ops []op) *stateModel {
	m := &stateModel{ledgers: map[int64]*ledgerModel{}, deleted: map[int64]bool{}}
	for _, o := range ops {
		m.apply(o)
	}
	return m
}

// apply follows the storage's rules: a deleted ledger is gone for good;
// the master key is set only if the ledger has none.
func (m *stateModel) apply(o op) {
	if m.deleted[o.ledger] {
		return
	}
	l := m.ledgers[o.ledger]
	if l == nil && (o.kind == opAdd || o.kind == opKey) {
		l = &ledgerModel{entries: map[int64][]byte{}}
		m.ledgers[o.ledger] = l
	}
	switch o.kind {
	case opAdd:
		l.entries[o.entry] = o.data
	case opKey:
		if l.key == nil {
			l.key = o.data
		}
	case opFence:
		l.fenced = true
	case opLAC:
		l.lac = o.data
	case opDelete:
		delete(m.ledgers, o.ledger)
		m.deleted[o.ledger] = true
	}
}

// replay re-applies the journaled operations from position cp, as the
// bookie does after a restart. A deleted ledger's ops may be refused.
func replay(db *DB, ops []op) error {
	for _, o := range ops {
		var err error
		switch o.kind {
		case opAdd:
			err = db.AddEntry(o.ledger, o.entry, o.data)
		case opKey:
			err = db.SetMasterKey(o.ledger, o.data)
		case opFence:
			_, err = db.SetFenced(o.ledger)
		case opLAC:
			err = db.SetExplicitLAC(o.ledger, o.data)
		case opDelete:
			continue // not journaled: DeleteLedger is durable when it returns
		}
		if err != nil && !(errors.Is(err, ErrNoLedger) && (o.kind == opFence || o.kind == opLAC)) {
			return fmt.Errorf("replay %v: %w", o, err)
		}
	}
	return nil
}

// checkDurable checks, before replay, what a completed checkpoint at cp
// promises: every entry and state change acknowledged before cp and not
// changed after is there, unless its ledger was deleted (deleted may also
// name a ledger whose deletion was in flight).
func checkDurable(db *DB, ops []op, cp int, deleted map[int64]bool) error {
	type last struct {
		at   int
		data []byte
	}
	entries := map[entryKeyID]last{}
	keys, lacs, fences := map[int64]last{}, map[int64]last{}, map[int64]int{}
	for i, o := range ops {
		switch o.kind {
		case opAdd:
			entries[entryKeyID{o.ledger, o.entry}] = last{i, o.data}
		case opKey:
			if _, ok := keys[o.ledger]; !ok {
				keys[o.ledger] = last{i, o.data}
			}
		case opLAC:
			lacs[o.ledger] = last{i, o.data}
		case opFence:
			if _, ok := fences[o.ledger]; !ok {
				fences[o.ledger] = i
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(entries), compareKeys) {
		w := entries[k]
		if w.at >= cp || deleted[k.ledgerID] {
			continue
		}
		got, err := db.ReadEntry(k.ledgerID, k.entryID)
		if err != nil || !bytes.Equal(got, w.data) {
			return fmt.Errorf("ledger %d entry %d, added at op %d before checkpoint %d: read %d bytes, %v",
				k.ledgerID, k.entryID, w.at, cp, len(got), err)
		}
	}
	for l, w := range keys {
		if w.at < cp && !deleted[l] {
			if got, err := db.MasterKey(l); err != nil || !bytes.Equal(got, w.data) {
				return fmt.Errorf("ledger %d master key set at op %d before checkpoint %d: %q %v", l, w.at, cp, got, err)
			}
		}
	}
	for l, at := range fences {
		if at < cp && !deleted[l] {
			if f, err := db.IsFenced(l); !f || err != nil {
				return fmt.Errorf("ledger %d fenced at op %d before checkpoint %d: fenced=%v %v", l, at, cp, f, err)
			}
		}
	}
	for l, w := range lacs {
		if w.at < cp && !deleted[l] {
			if got, err := db.ExplicitLAC(l); err != nil || !bytes.Equal(got, w.data) {
				return fmt.Errorf("ledger %d LAC set at op %d before checkpoint %d: %q %v", l, w.at, cp, got, err)
			}
		}
	}
	return nil
}

// checkModel compares the whole storage with the model.
func checkModel(db *DB, m *stateModel) error {
	var ids []int64
	if err := db.Ledgers(func(id int64) bool { ids = append(ids, id); return true }); err != nil {
		return err
	}
	if want := slices.Sorted(maps.Keys(m.ledgers)); !slices.Equal(ids, want) {
		return fmt.Errorf("ledgers %v, want %v", ids, want)
	}
	for _, id := range ids {
		if err := checkLedger(db, id, m.ledgers[id]); err != nil {
			return fmt.Errorf("ledger %d: %w", id, err)
		}
	}
	for id := range m.deleted {
		if ok, err := db.LedgerExists(id); ok || err != nil {
			return fmt.Errorf("deleted ledger %d exists=%v err=%v", id, ok, err)
		}
		if _, err := db.ReadEntry(id, 0); !errors.Is(err, ErrNoLedger) {
			return fmt.Errorf("deleted ledger %d: ReadEntry: %v", id, err)
		}
	}
	return nil
}

func checkLedger(db *DB, id int64, l *ledgerModel) error {
	if k, err := db.MasterKey(id); err != nil || !bytes.Equal(k, l.key) || (k == nil) != (l.key == nil) {
		return fmt.Errorf("master key %q (%v), want %q", k, err, l.key)
	}
	if f, err := db.IsFenced(id); err != nil || f != l.fenced {
		return fmt.Errorf("fenced %v (%v), want %v", f, err, l.fenced)
	}
	if lac, err := db.ExplicitLAC(id); err != nil || !bytes.Equal(lac, l.lac) || (lac == nil) != (l.lac == nil) {
		return fmt.Errorf("explicit LAC %q (%v), want %q", lac, err, l.lac)
	}
	maxID := int64(-1)
	for e, want := range l.entries {
		got, err := db.ReadEntry(id, e)
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("entry %d: read %d bytes (%v), want %d", e, len(got), err, len(want))
		}
		maxID = max(maxID, e)
	}
	last, err := db.LastEntryID(id)
	switch {
	case maxID < 0 && !errors.Is(err, ErrNoEntry):
		return fmt.Errorf("LastEntryID of a ledger without entries: %d, %v", last, err)
	case maxID >= 0 && (err != nil || last != maxID):
		return fmt.Errorf("LastEntryID %d (%v), want %d", last, err, maxID)
	}
	if _, err := db.ReadEntry(id, maxID+1); !errors.Is(err, ErrNoEntry) {
		return fmt.Errorf("entry %d was never added: %v", maxID+1, err)
	}
	return nil
}

// checkIndex checks that every index entry belongs to a ledger with state
// and reads back as one of the versions ever added for it: no location
// points at garbage, no deleted ledger left entries behind.
func checkIndex(db *DB, ops []op) error {
	written := map[entryKeyID][][]byte{}
	for _, o := range ops {
		if o.kind == opAdd {
			k := entryKeyID{o.ledger, o.entry}
			written[k] = append(written[k], o.data)
		}
	}
	for _, s := range db.shards {
		var keys []entryKeyID
		lower, upper := []byte{prefixEntry}, []byte{prefixEntry + 1}
		err := s.ix.scan(lower, upper, func(k, _ []byte) (bool, error) {
			l, e, ok := decodeEntryKey(k)
			if !ok {
				return false, fmt.Errorf("bad entry key %x", k)
			}
			keys = append(keys, entryKeyID{l, e})
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if !s.hasLedger(k.ledgerID) {
				return fmt.Errorf("index entry %d/%d of a ledger without state", k.ledgerID, k.entryID)
			}
			got, err := db.ReadEntry(k.ledgerID, k.entryID)
			if err != nil {
				return fmt.Errorf("index entry %d/%d: %w", k.ledgerID, k.entryID, err)
			}
			if !slices.ContainsFunc(written[k], func(w []byte) bool { return bytes.Equal(w, got) }) {
				return fmt.Errorf("index entry %d/%d reads %d bytes never added", k.ledgerID, k.entryID, len(got))
			}
		}
	}
	return nil
}
