package managedledger

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Golden-format tests of the managed ledger's persistent JSON: the
// managed-ledger node (ledger list), the cursor node, and the cursor
// snapshots stored as entries of cursor ledgers. testdata/golden-v1 holds
// them as written by this version; the test checks that decoding gives
// exactly the values written and encoding those values gives exactly the
// committed bytes. A change to a field name, type or omission rule fails
// here; if intended, it must stay readable by older and newer owners
// (metadata outlives a broker version), and only then `go test
// ./managedledger -run TestGolden -update` rewrites the files.

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

const goldenMLDir = "testdata/golden-v1"

type goldenJSON struct {
	file  string
	value any // a pointer to the value the file holds
	// fresh returns a new zero value of the same type to decode into.
	fresh func() any
	// must are substrings the bytes must hold (field names by hand, so a
	// change to the struct tags and the files together still fails).
	must []string
}

func goldenJSONFiles() []goldenJSON {
	ml := func() any { return new(mlMetadata) }
	cn := func() any { return new(cursorNode) }
	cs := func() any { return new(cursorSnapshot) }
	return []goldenJSON{
		{"managed-ledger.json", &mlMetadata{
			Ledgers: []ledgerMeta{
				{ID: 3, Entries: 10, Size: 1234, Timestamp: 1_700_000_000_000},
				{ID: 7, Entries: 5, Size: 99, Timestamp: 1_700_000_100_000},
				{ID: 12}, // the open ledger: no entries counted, no close time
			},
			Properties: map[string]string{"pulsar.managed-ledger.x": "y", "a": "1"},
		}, ml, []string{`"ledgers":[{"ledgerId":3,"entries":10,"size":1234,"timestamp":1700000000000}`, `"properties":{"a":"1"`}},
		{"managed-ledger-terminated.json", &mlMetadata{
			Ledgers:    []ledgerMeta{{ID: 3, Entries: 10, Size: 1234, Timestamp: 1_700_000_000_000}},
			Terminated: &Position{LedgerID: 3, EntryID: 9},
		}, ml, []string{`"terminatedPosition":{"LedgerID":3,"EntryID":9}`}},
		// What a new managed ledger's node holds (bk_ledger.go).
		{"managed-ledger-new.json", &mlMetadata{Ledgers: []ledgerMeta{}}, ml, []string{`{"ledgers":[]}`}},
		{"cursor-node.json", &cursorNode{CursorLedger: 15, MarkDelete: Position{LedgerID: 7, EntryID: 2},
			LastActive: 1_700_000_200_123}, cn,
			[]string{`{"cursorsLedgerId":15,"markDeletePosition":{"LedgerID":7,"EntryID":2},"lastActive":1700000200123}`}},
		// A cursor created before its first snapshot: no cursor ledger yet.
		{"cursor-node-new.json", &cursorNode{CursorLedger: -1, MarkDelete: Position{LedgerID: 12, EntryID: -1},
			LastActive: 1_700_000_300_000}, cn, []string{`"cursorsLedgerId":-1`, `"EntryID":-1`}},
		{"cursor-snapshot.json", &cursorSnapshot{
			MarkDelete: Position{LedgerID: 3, EntryID: 4},
			Acked: [][2]Position{
				{{LedgerID: 3, EntryID: 5}, {LedgerID: 3, EntryID: 7}},
				{{LedgerID: 7, EntryID: 0}, {LedgerID: 7, EntryID: 1}},
			},
			Batch: []batchSnapshot{
				{LedgerID: 7, EntryID: 3, AckSet: []uint64{0b1010}},
				{LedgerID: 7, EntryID: 4, AckSet: []uint64{1<<64 - 1, 1 << 63}},
			},
			Properties: map[string]int64{"replicated": 42, "a": -1},
		}, cs, []string{`"markDelete":{"LedgerID":3,"EntryID":4}`,
			`"individuallyDeleted":[[{"LedgerID":3,"EntryID":5},{"LedgerID":3,"EntryID":7}]`,
			`"batchDeletedIndexes":[{"ledgerId":7,"entryId":3,"ackSet":[10]}`, `18446744073709551615`,
			`"properties":{"a":-1,"replicated":42}`}},
		// A snapshot with only a mark-delete, as written before batch-index
		// acks and properties existed (and still, when there are none).
		{"cursor-snapshot-markdelete-only.json", &cursorSnapshot{MarkDelete: Position{LedgerID: 3, EntryID: 4}}, cs,
			[]string{`{"markDelete":{"LedgerID":3,"EntryID":4}}`}},
	}
}

// TestGoldenManagedLedgerJSON: the committed JSON decodes to exactly the
// values written, and encoding them gives the committed bytes.
func TestGoldenManagedLedgerJSON(t *testing.T) {
	for _, g := range goldenJSONFiles() {
		t.Run(g.file, func(t *testing.T) {
			want, err := json.Marshal(g.value)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(goldenMLDir, g.file)
			if *updateGolden {
				if err := os.MkdirAll(goldenMLDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%v (run `go test ./managedledger -run TestGolden -update` once to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encoding the golden value gives\n%s\ncommitted\n%s", want, got)
			}
			for _, s := range g.must {
				if !bytes.Contains(got, []byte(s)) {
					t.Errorf("%s does not hold %s", got, s)
				}
			}
			v := g.fresh()
			if err := json.Unmarshal(got, v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, g.value) {
				t.Errorf("decodes to %+v, want %+v", v, g.value)
			}
		})
	}
}
