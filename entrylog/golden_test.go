package entrylog

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/engine"
)

// Golden-format tests: testdata/golden-v1 holds a small version-1 entry
// log and the index keys and values that describe it (as text: the Pebble
// directory itself is Pebble's format, not ours). The tests check that the
// current code decodes them to exactly the values written, that encoding
// those values gives exactly the committed bytes, and that a DB opened on
// them reads the entries back. A change to the format fails here; if it is
// intended, it needs a new FormatVersion and a reader for version 1, and
// only then `go test ./entrylog -run TestGolden -update` to add new files.

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

const (
	goldenDir       = "testdata/golden-v1"
	goldenIndexFile = "index.txt"
	// goldenCreated is the log's creation time (fixed, so the file is stable).
	goldenCreated int64  = 1_700_000_000_123_456_789
	goldenLogID   uint64 = 1
)

func goldenPayload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// goldenRecords are the entry log's records, in file order.
var goldenRecords = []record{
	{ledgerID: 3, entryID: 0, payload: []byte("first entry of ledger 3")},
	{ledgerID: 3, entryID: 1, payload: []byte{}},
	{ledgerID: 3, entryID: 2, payload: goldenPayload(700, 1)},
	{ledgerID: 1 << 40, entryID: 5, payload: []byte("a large ledger id")},
}

// goldenLocations returns where each golden record lies in the log.
func goldenLocations() []location {
	var locs []location
	off := int64(LogHeaderSize)
	for _, r := range goldenRecords {
		locs = append(locs, location{logID: goldenLogID, offset: off, length: uint32(len(r.payload))})
		off += RecordHeaderSize + int64(len(r.payload))
	}
	return locs
}

func encodeGoldenLog() []byte {
	b := logHeader{logID: goldenLogID, created: goldenCreated}.encode()
	for _, r := range goldenRecords {
		b = append(b, encodeRecord(r.ledgerID, r.entryID, r.payload)...)
	}
	return b
}

// goldenKV is one index key and value, with the value decoded.
type goldenKV struct {
	comment    string
	key, value []byte
	decoded    any // location, *ledgerState, uint64, or nil (format key, tombstone)
}

// goldenIndex lists the index keys and values of every kind for the golden
// log: the format key, entry locations, ledger states (plain, fenced with
// a master key, master key and explicit LAC), a tombstone, and log usage.
func goldenIndex() []goldenKV {
	locs := goldenLocations()
	kvs := []goldenKV{{comment: "format version", key: []byte(formatKey), value: []byte{FormatVersion}}}
	usage := map[int64]uint64{}
	for i, r := range goldenRecords {
		kvs = append(kvs, goldenKV{comment: fmt.Sprintf("entry %d/%d", r.ledgerID, r.entryID),
			key: entryKey(r.ledgerID, r.entryID), value: encodeLocation(locs[i]), decoded: locs[i]})
		usage[r.ledgerID] += uint64(locs[i].recordSize())
	}
	states := []struct {
		ledger int64
		s      *ledgerState
		what   string
	}{
		{3, &ledgerState{masterKey: []byte("master-key-3"), fenced: true}, "ledger 3 state: fenced, master key"},
		{1 << 40, &ledgerState{}, "ledger 1<<40 state: nothing set"},
		{5, &ledgerState{masterKey: []byte("k5"), explicitLAC: goldenPayload(140, 9)}, "ledger 5 state: master key, explicit LAC (two-byte uvarint length)"},
	}
	for _, st := range states {
		kvs = append(kvs, goldenKV{comment: st.what, key: ledgerKey(prefixLedger, st.ledger), value: encodeState(st.s), decoded: st.s})
	}
	kvs = append(kvs, goldenKV{comment: "ledger 4 tombstone", key: ledgerKey(prefixTombstone, 4), value: []byte{}})
	for _, l := range []int64{3, 1 << 40} {
		kvs = append(kvs, goldenKV{comment: fmt.Sprintf("log %d usage of ledger %d", goldenLogID, l),
			key: logMetaKey(goldenLogID, l), value: encodeUint64(usage[l]), decoded: usage[l]})
	}
	return kvs
}

// formatGoldenIndex writes one line per key: key hex, value hex ("-" when
// empty), then a comment.
func formatGoldenIndex(kvs []goldenKV) []byte {
	var b strings.Builder
	b.WriteString("# entrylog index keys and values, format version 1 (see entrylog/doc.go): key-hex value-hex # what\n")
	for _, kv := range kvs {
		v := hex.EncodeToString(kv.value)
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(&b, "%s %s # %s\n", hex.EncodeToString(kv.key), v, kv.comment)
	}
	return []byte(b.String())
}

func parseGoldenIndex(t *testing.T, text []byte) [][2][]byte {
	t.Helper()
	var out [][2][]byte
	for i, line := range strings.Split(string(text), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("%s line %d: %q", goldenIndexFile, i+1, line)
		}
		k, err := hex.DecodeString(f[0])
		if err != nil {
			t.Fatalf("%s line %d: %v", goldenIndexFile, i+1, err)
		}
		v := []byte{}
		if f[1] != "-" {
			if v, err = hex.DecodeString(f[1]); err != nil {
				t.Fatalf("%s line %d: %v", goldenIndexFile, i+1, err)
			}
		}
		out = append(out, [2][]byte{k, v})
	}
	return out
}

func goldenBytes(t *testing.T, name string, want []byte) []byte {
	t.Helper()
	p := filepath.Join(goldenDir, name)
	if *updateGolden {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run `go test ./entrylog -run TestGolden -update` once to create it)", err)
	}
	return got
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("first difference at byte %d (%#02x vs %#02x); lengths %d and %d", i, a[i], b[i], len(a), len(b))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// TestGoldenEntryLog: the committed version-1 entry log decodes to exactly
// the records written and re-encodes to the same bytes.
func TestGoldenEntryLog(t *testing.T) {
	want := encodeGoldenLog()
	got := goldenBytes(t, logFileName(goldenLogID), want)
	if !bytes.Equal(got, want) {
		t.Errorf("encoding the golden records no longer gives the committed log: %s", firstDiff(got, want))
	}
	// Offsets from the package doc, by hand.
	if len(got) < LogHeaderSize+RecordHeaderSize {
		t.Fatalf("log of %d bytes", len(got))
	}
	le32 := func(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
	le64 := func(b []byte) uint64 { return uint64(le32(b)) | uint64(le32(b[4:]))<<32 }
	if string(got[:8]) != "MGENTLOG" || le32(got[8:]) != 1 || le64(got[16:]) != goldenLogID ||
		int64(le64(got[24:])) != goldenCreated || le32(got[32:]) != 24 || le32(got[36:]) != 0 {
		t.Errorf("header fields at the documented offsets: %x", got[:40])
	}
	if !isZero(got[40:LogHeaderSize]) {
		t.Error("header padding is not zero")
	}
	r := got[LogHeaderSize:]
	if le32(r) != uint32(len(goldenRecords[0].payload)) || le64(r[8:]) != 3 || le64(r[16:]) != 0 ||
		string(r[24:24+len(goldenRecords[0].payload)]) != string(goldenRecords[0].payload) {
		t.Errorf("first record at the documented offsets: %x", r[:24])
	}

	h, err := decodeLogHeader(got[:LogHeaderSize], logFileName(goldenLogID))
	if err != nil || h != (logHeader{logID: goldenLogID, created: goldenCreated}) {
		t.Fatalf("header decodes to %+v, %v", h, err)
	}
	off := LogHeaderSize
	for i, w := range goldenRecords {
		rec, n, reason := decodeRecord(got[off:])
		if reason != "" {
			t.Fatalf("record %d at %d: %s", i, off, reason)
		}
		if rec.ledgerID != w.ledgerID || rec.entryID != w.entryID || !bytes.Equal(rec.payload, w.payload) {
			t.Errorf("record %d at %d decodes to %d/%d (%d bytes), want %d/%d (%d bytes)", i, off,
				rec.ledgerID, rec.entryID, len(rec.payload), w.ledgerID, w.entryID, len(w.payload))
		}
		off += n
	}
	if off != len(got) {
		t.Errorf("records end at %d, the log has %d bytes", off, len(got))
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestGoldenEntryIndex: the committed index keys and values decode to
// exactly the values written, and encoding those gives the same bytes.
func TestGoldenEntryIndex(t *testing.T) {
	kvs := goldenIndex()
	text := goldenBytes(t, goldenIndexFile, formatGoldenIndex(kvs))
	committed := parseGoldenIndex(t, text)
	if len(committed) != len(kvs) {
		t.Fatalf("%s has %d keys, the golden values %d", goldenIndexFile, len(committed), len(kvs))
	}
	for i, kv := range kvs {
		k, v := committed[i][0], committed[i][1]
		if !bytes.Equal(k, kv.key) || !bytes.Equal(v, kv.value) {
			t.Errorf("%s: encoding gives key %x value %x, committed key %x value %x", kv.comment, kv.key, kv.value, k, v)
		}
		switch want := kv.decoded.(type) {
		case location:
			lg, en, ok := decodeEntryKey(k)
			rec := goldenRecords[i-1]
			if !ok || lg != rec.ledgerID || en != rec.entryID {
				t.Errorf("%s: key %x decodes to %d/%d %v", kv.comment, k, lg, en, ok)
			}
			if got, ok := decodeLocation(v); !ok || got != want {
				t.Errorf("%s: value %x decodes to %+v %v, want %+v", kv.comment, v, got, ok, want)
			}
		case *ledgerState:
			if _, ok := decodeLedgerKey(prefixLedger, k); !ok {
				t.Errorf("%s: key %x is not a ledger-state key", kv.comment, k)
			}
			got, reason := decodeState(v)
			if reason != "" || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: value %x decodes to %+v %q, want %+v", kv.comment, v, got, reason, want)
			}
		case uint64:
			logID, lg, ok := decodeLogMetaKey(k)
			if !ok || logID != goldenLogID || len(v) != 8 || decodeUint64(v) != want {
				t.Errorf("%s: %x=%x decodes to log %d ledger %d (ok %v)", kv.comment, k, v, logID, lg, ok)
			}
		}
	}

	// Key layouts by hand (big-endian, sign bit flipped), so the encoders
	// and decoders cannot change together unnoticed.
	for _, c := range []struct {
		got  []byte
		want string
	}{
		{entryKey(3, 0), "65" + "8000000000000003" + "8000000000000000"},
		{entryKey(1<<40, 5), "65" + "8000010000000000" + "8000000000000005"},
		{entryKey(0, -1), "65" + "8000000000000000" + "7fffffffffffffff"},
		{ledgerKey(prefixLedger, 3), "6c" + "8000000000000003"},
		{ledgerKey(prefixTombstone, 4), "64" + "8000000000000004"},
		{logMetaKey(1, 3), "6d" + "0000000000000001" + "8000000000000003"},
		{[]byte(formatKey), hex.EncodeToString([]byte("#format"))},
		{encodeLocation(location{logID: 1, offset: 4096, length: 23}), "0100000000000000" + "0010000000000000" + "17000000"},
		{encodeState(&ledgerState{}), "0100"},
		{encodeState(&ledgerState{fenced: true, masterKey: []byte("k")}), "0103016b"},
		{encodeState(&ledgerState{explicitLAC: []byte{9}}), "01040109"},
	} {
		if hex.EncodeToString(c.got) != c.want {
			t.Errorf("encoded %x, the format says %s", c.got, c.want)
		}
	}
	lo, hi := ledgerEntriesBounds(3)
	if k := entryKey(3, math.MaxInt64); bytes.Compare(lo, k) > 0 || bytes.Compare(k, hi) >= 0 {
		t.Error("ledger bounds do not hold its last possible entry")
	}
}

// TestGoldenEntryLogOpen: a DB opened on the committed log, with an index
// holding the committed keys, reads the entries and ledger states back.
func TestGoldenEntryLogOpen(t *testing.T) {
	logBytes := goldenBytes(t, logFileName(goldenLogID), encodeGoldenLog())
	kvs := parseGoldenIndex(t, goldenBytes(t, goldenIndexFile, formatGoldenIndex(goldenIndex())))

	fs := engine.NewMem()
	ifs := vfs.NewMem()
	const dir = "/ledgers"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteFileAtomic(fs, filepath.Join(dir, logFileName(goldenLogID)), logBytes); err != nil {
		t.Fatal(err)
	}
	x, err := openIndex(filepath.Join(dir, indexDirName), indexOptions{fs: ifs, cacheSize: 1 << 20, memTableSize: 1 << 20, log: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b := x.db.NewBatch()
	for _, kv := range kvs {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.commit(b, true); err != nil {
		t.Fatal(err)
	}
	if err := x.close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(fs, []string{dir}, Options{FlushInterval: -1, GCWaitTime: -1, IndexFS: ifs, Logger: testLogger()})
	if err != nil {
		t.Fatalf("open on the golden files: %v", err)
	}
	defer db.Close()
	for _, r := range goldenRecords {
		got, err := db.ReadEntry(r.ledgerID, r.entryID)
		if err != nil || !bytes.Equal(got, r.payload) {
			t.Errorf("read %d/%d: %d bytes, %v; want %d bytes", r.ledgerID, r.entryID, len(got), err, len(r.payload))
		}
	}
	if last, err := db.LastEntryID(3); err != nil || last != 2 {
		t.Errorf("last entry of ledger 3: %d, %v", last, err)
	}
	if f, err := db.IsFenced(3); err != nil || !f {
		t.Errorf("ledger 3 fenced: %v, %v", f, err)
	}
	if k, err := db.MasterKey(3); err != nil || string(k) != "master-key-3" {
		t.Errorf("ledger 3 master key: %q, %v", k, err)
	}
	if f, err := db.IsFenced(1 << 40); err != nil || f {
		t.Errorf("ledger 1<<40 fenced: %v, %v", f, err)
	}
	if lac, err := db.ExplicitLAC(5); err != nil || !bytes.Equal(lac, goldenPayload(140, 9)) {
		t.Errorf("ledger 5 explicit LAC: %x, %v", lac, err)
	}
	if ok, err := db.LedgerExists(4); err != nil || ok {
		t.Errorf("tombstoned ledger 4 exists: %v, %v", ok, err)
	}
	// A tombstoned ledger stays deleted: an add to it is ignored.
	if err := db.AddEntry(4, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.LedgerExists(4); err != nil || ok {
		t.Errorf("tombstoned ledger 4 exists after an add: %v, %v", ok, err)
	}
	var ledgers []int64
	if err := db.Ledgers(func(id int64) bool { ledgers = append(ledgers, id); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ledgers) != fmt.Sprint([]int64{3, 5, 1 << 40}) {
		t.Errorf("ledgers %v", ledgers)
	}
}
