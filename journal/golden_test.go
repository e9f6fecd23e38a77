package journal

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/internal/crc32c"
)

// Golden-format tests: testdata/golden-v1 holds a small journal directory
// in format version 1, committed once. The test checks that the current
// code decodes it to exactly the values written, that encoding those values
// gives exactly the committed bytes, and that Open replays it. A change to
// the on-disk format fails here; if it is intended, it needs a new
// FormatVersion and a reader for version 1, and only then
// `go test ./journal -run TestGolden -update` to add the new files.

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

const goldenJournalDir = "testdata/golden-v1"

// goldenCreated is the files' creation time (fixed, so files are stable).
const goldenCreated int64 = 1_700_000_000_123_456_789

// The bookie's meta entry ids (bookie/ops.go): records of other kinds
// than entries share the format.
const (
	goldenMetaMasterKey   int64 = -0x1000
	goldenMetaFence       int64 = -0x2000
	goldenMetaForce       int64 = -0x4000
	goldenMetaExplicitLAC int64 = -0x8000
)

type goldenGroup struct {
	offset  int64 // where the group starts (its durableBefore: serial mode)
	seq     uint64
	records []Entry
}

type goldenFile struct {
	id     uint64
	groups []goldenGroup
}

func goldenPayload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// goldenJournal is what testdata/golden-v1 holds: two files, groups of
// entries and of bookie meta records (master key, fence, explicit LAC,
// force), one group spanning two blocks, and a checkpoint after the
// first group.
func goldenJournal() ([]goldenFile, Mark) {
	files := []goldenFile{
		{id: 1, groups: []goldenGroup{
			{offset: 4096, seq: 1, records: []Entry{
				{LedgerID: 7, EntryID: goldenMetaMasterKey, Payload: []byte("master-key-of-ledger7")},
				{LedgerID: 7, EntryID: 0, Payload: []byte("hello, journal")},
				{LedgerID: 7, EntryID: 1, Payload: []byte{}},
			}},
			{offset: 8192, seq: 2, records: []Entry{
				{LedgerID: 7, EntryID: 2, Payload: goldenPayload(300, 1)},
				{LedgerID: 7, EntryID: goldenMetaFence, Payload: []byte{}},
				{LedgerID: 9, EntryID: goldenMetaExplicitLAC, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 2}},
			}},
			// Records past one block: the group takes two, the next starts at 20480.
			{offset: 12288, seq: 3, records: []Entry{
				{LedgerID: 1 << 40, EntryID: 0, Payload: goldenPayload(5000, 3)},
			}},
		}},
		{id: 2, groups: []goldenGroup{
			{offset: 4096, seq: 4, records: []Entry{
				{LedgerID: 9, EntryID: goldenMetaForce, Payload: []byte{}},
				{LedgerID: 9, EntryID: 0, Payload: []byte("after rotation")},
			}},
		}},
	}
	return files, Mark{FileID: 1, Offset: 8192}
}

// encodeGoldenFile lays out a journal file with the format's encoders.
func encodeGoldenFile(t *testing.T, f goldenFile) []byte {
	t.Helper()
	out := fileHeader{fileID: f.id, created: goldenCreated}.encode()
	for _, g := range f.groups {
		if int64(len(out)) != g.offset {
			t.Fatalf("golden file %d: group %d at %d, the file has %d bytes", f.id, g.seq, g.offset, len(out))
		}
		n := 0
		for _, r := range g.records {
			n += recordHeaderSize + len(r.Payload)
		}
		b := make([]byte, groupSpan(n))
		groupHeader{fileID: f.id, durableBefore: uint64(g.offset), recordsLen: uint32(n),
			count: uint32(len(g.records)), seq: g.seq}.put(b)
		p := groupHeaderSize
		for _, r := range g.records {
			putRecordHeader(b[p:], r.LedgerID, r.EntryID, r.Payload, crc32c.Known{})
			p += recordHeaderSize
			p += copy(b[p:], r.Payload)
		}
		out = append(out, b...)
	}
	return out
}

// goldenBytes returns the committed bytes of name, or writes want there
// first under -update.
func goldenBytes(t *testing.T, name string, want []byte) []byte {
	t.Helper()
	p := filepath.Join(goldenJournalDir, name)
	if *updateGolden {
		if err := os.MkdirAll(goldenJournalDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run `go test ./journal -run TestGolden -update` once to create it)", err)
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

func sameEntries(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool {
		return x.LedgerID == y.LedgerID && x.EntryID == y.EntryID && bytes.Equal(x.Payload, y.Payload)
	})
}

// TestGoldenJournal: the committed version-1 journal decodes to exactly
// the values written, re-encodes to the same bytes, and replays.
func TestGoldenJournal(t *testing.T) {
	files, mark := goldenJournal()
	committed := map[string][]byte{}

	// Encoders: the same values give the committed bytes.
	for _, f := range files {
		want := encodeGoldenFile(t, f)
		got := goldenBytes(t, fileName(f.id), want)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoding the golden values no longer gives the committed bytes: %s", fileName(f.id), firstDiff(got, want))
		}
		committed[fileName(f.id)] = got
	}
	cp := goldenBytes(t, checkpointFile, encodeMark(mark))
	if !bytes.Equal(cp, encodeMark(mark)) {
		t.Errorf("checkpoint: encoding %v gives %x, committed %x", mark, encodeMark(mark), cp)
	}
	committed[checkpointFile] = cp

	// Fixed offsets, checked by hand against the package doc, so a change
	// to the encoders and the decoders together still fails.
	f1 := committed[fileName(1)]
	checkLE := func(what string, b []byte, want uint64) {
		t.Helper()
		var got uint64
		for i := len(b) - 1; i >= 0; i-- {
			got = got<<8 | uint64(b[i])
		}
		if got != want {
			t.Errorf("%s: %#x, want %#x", what, got, want)
		}
	}
	if len(f1) >= 3*BlockSize {
		if string(f1[:8]) != "MGJOURNL" {
			t.Errorf("file magic %q", f1[:8])
		}
		checkLE("header version", f1[8:12], 1)
		checkLE("header fileID", f1[16:24], 1)
		checkLE("header created", f1[24:32], uint64(goldenCreated))
		checkLE("header blockSize", f1[32:36], 4096)
		g := f1[BlockSize:]
		checkLE("group magic", g[0:4], 0x4d4a4752)
		checkLE("group fileID", g[8:16], 1)
		checkLE("group durableBefore", g[16:24], 4096)
		checkLE("group count", g[28:32], 3)
		checkLE("group seq", g[32:40], 1)
		checkLE("record length", g[40:44], uint64(len("master-key-of-ledger7")))
		checkLE("record ledger", g[48:56], 7)
		checkLE("record entry", g[56:64], uint64(0xfffffffffffff000))
		if string(g[64:64+21]) != "master-key-of-ledger7" {
			t.Errorf("record payload %q", g[64:64+21])
		}
		checkLE("second group magic", f1[2*BlockSize:2*BlockSize+4], 0x4d4a4752)
	} else {
		t.Errorf("%s is %d bytes", fileName(1), len(f1))
	}
	checkLE("checkpoint fileID", cp[0:8], 1)
	checkLE("checkpoint offset", cp[8:16], 8192)

	// Decoders: the committed bytes give exactly the values written.
	for _, f := range files {
		b := committed[fileName(f.id)]
		h, err := decodeFileHeader(b[:BlockSize], fileName(f.id))
		if err != nil || h != (fileHeader{fileID: f.id, created: goldenCreated}) {
			t.Fatalf("%s: header decodes to %+v, %v", fileName(f.id), h, err)
		}
		off := int64(BlockSize)
		for _, g := range f.groups {
			gh, reason := parseGroupHeader(b[off:], f.id)
			if reason != "" {
				t.Fatalf("%s: group at %d: %s", fileName(f.id), off, reason)
			}
			if gh.seq != g.seq || gh.durableBefore != uint64(g.offset) || gh.count != uint32(len(g.records)) {
				t.Errorf("%s: group at %d decodes to %+v", fileName(f.id), off, gh)
			}
			var got []Entry
			reason, err := parseRecords(b[off+groupHeaderSize:off+groupHeaderSize+int64(gh.recordsLen)], gh.count, func(e Entry) error {
				got = append(got, e)
				return nil
			})
			if reason != "" || err != nil {
				t.Fatalf("%s: records at %d: %s %v", fileName(f.id), off, reason, err)
			}
			if !sameEntries(got, g.records) {
				t.Errorf("%s: group at %d decodes to %v, want %v", fileName(f.id), off, got, g.records)
			}
			off += groupSpan(int(gh.recordsLen))
		}
		if off != int64(len(b)) {
			t.Errorf("%s: groups end at %d, the file has %d bytes", fileName(f.id), off, len(b))
		}
	}
	m, err := decodeMark(cp, checkpointFile)
	if err != nil || m != mark {
		t.Errorf("checkpoint decodes to %v, %v; want %v", m, err, mark)
	}

	// Open: replay from the checkpoint gives the records after it, in order;
	// without the checkpoint, all of them.
	var all, afterMark []Entry
	for _, f := range files {
		for _, g := range f.groups {
			all = append(all, g.records...)
			if !(Mark{FileID: f.id, Offset: g.offset}).Before(mark) {
				afterMark = append(afterMark, g.records...)
			}
		}
	}
	for _, tc := range []struct {
		name       string
		checkpoint bool
		want       []Entry
	}{{"with checkpoint", true, afterMark}, {"without checkpoint", false, all}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := engine.NewMem()
			if err := fs.MkdirAll("/journal", 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range committed {
				if name == checkpointFile && !tc.checkpoint {
					continue
				}
				if err := engine.WriteFileAtomic(fs, "/journal/"+name, b); err != nil {
					t.Fatal(err)
				}
			}
			j, got := openT(t, fs, Options{NoFileReuse: true})
			defer j.Close()
			if !sameEntries(got, tc.want) {
				t.Errorf("replayed %d records, want %d: %v", len(got), len(tc.want), got)
			}
			// The next add goes to a new file after the golden ones, its
			// group numbered after theirs.
			if _, err := addSync(t, j, 9, 1, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := engine.ReadFile(fs, "/journal/"+fileName(3))
			if err != nil {
				t.Fatal(err)
			}
			gh, reason := parseGroupHeader(b[BlockSize:], 3)
			if reason != "" || gh.seq != 5 {
				t.Errorf("first group after the golden files: %+v %s, want seq 5", gh, reason)
			}
		})
	}
}

// TestGoldenJournalWriter: the writer lays out groups as the golden files
// do: a journal written one add at a time (one record per group, serial
// mode) is, header time aside, what the format's encoders give for the
// same records.
func TestGoldenJournalWriter(t *testing.T) {
	files, _ := goldenJournal()
	fs := engine.NewMem()
	j, _ := openT(t, fs, Options{PreallocSize: BlockSize, NoFileReuse: true})
	want := goldenFile{id: 1}
	off, seq := int64(BlockSize), uint64(0)
	for _, f := range files {
		for _, g := range f.groups {
			for _, r := range g.records {
				if _, err := addSync(t, j, r.LedgerID, r.EntryID, r.Payload); err != nil {
					t.Fatal(err)
				}
				seq++
				want.groups = append(want.groups, goldenGroup{offset: off, seq: seq, records: []Entry{r}})
				off += groupSpan(recordHeaderSize + len(r.Payload))
			}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := engine.ReadFile(fs, "/journal/"+fileName(1))
	if err != nil {
		t.Fatal(err)
	}
	h, err := decodeFileHeader(got[:BlockSize], fileName(1))
	if err != nil || h.fileID != 1 {
		t.Fatalf("header %+v, %v", h, err)
	}
	exp := encodeGoldenFile(t, want)
	exp = append(exp[:0:0], exp...)
	copy(exp, fileHeader{fileID: 1, created: h.created}.encode())
	if len(got) < len(exp) {
		t.Fatalf("the writer wrote %d bytes, want at least %d", len(got), len(exp))
	}
	if !bytes.Equal(got[:len(exp)], exp) {
		t.Errorf("the writer's file differs from the format: %s", firstDiff(got[:len(exp)], exp))
	}
	if !allZero(got[len(exp):]) {
		t.Errorf("the writer's file has data after its last group (%d bytes)", len(got)-len(exp))
	}
}
