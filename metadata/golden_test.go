package metadata

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/magnetar-io/magnetar/internal/pebblelog"
)

// Golden-format test of the local: backend: testdata/golden-v1/local.txt
// holds, as text, the Pebble keys and values of a small version-1 store
// (the Pebble directory itself is Pebble's format, not ours). The test
// checks that the current code decodes them to exactly the nodes written,
// that encoding those nodes gives exactly the committed bytes, and that a
// store opened on them serves the tree. A change to the format fails here;
// if it is intended, it needs a new localFormatVersion and a migration, and
// only then `go test ./metadata -run TestGolden -update` to add new files.

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

const goldenLocalFile = "testdata/golden-v1/local.txt"

type goldenNode struct {
	path string
	node *memNode
}

func goldenMillis(ms int64) time.Time { return time.UnixMilli(ms) }

// goldenLocalNodes is the tree in the golden store: the root, plain
// parents, a JSON value with edits, a binary value, a parent whose
// cversion names the next sequential child, and times needing long
// varints.
func goldenLocalNodes() []goldenNode {
	const t0 = 1_700_000_000_000
	return []goldenNode{
		{"/", &memNode{cversion: 3, created: goldenMillis(0), modified: goldenMillis(0)}},
		{"/admin", &memNode{cversion: 1, created: goldenMillis(t0), modified: goldenMillis(t0)}},
		{"/admin/clusters", &memNode{cversion: 1, created: goldenMillis(t0), modified: goldenMillis(t0)}},
		{"/admin/clusters/standalone", &memNode{version: 3, created: goldenMillis(t0 + 1),
			modified: goldenMillis(t0 + 86_400_000), value: []byte(`{"serviceUrl":"pulsar://localhost:6650"}`)}},
		{"/ledgers", &memNode{version: 1, cversion: 300, created: goldenMillis(t0 + 2), modified: goldenMillis(t0 + 3),
			value: []byte{0x00, 0xff, 0x80, 0x7f}}},
		{"/ledgers/L0000000299", &memNode{created: goldenMillis(t0 + 4), modified: goldenMillis(t0 + 4), value: []byte("x")}},
		{"/old", &memNode{version: 200, created: goldenMillis(-1), modified: goldenMillis(1 << 50)}},
	}
}

type goldenLocalKV struct {
	comment    string
	key, value []byte
}

func goldenLocalKVs() []goldenLocalKV {
	kvs := []goldenLocalKV{{"format version", []byte(localFormatKey), []byte{localFormatVersion}}}
	for _, n := range goldenLocalNodes() {
		kvs = append(kvs, goldenLocalKV{"node " + n.path, nodeKey(n.path), encodeRecord(n.node)})
	}
	return kvs
}

func formatGoldenLocal(kvs []goldenLocalKV) []byte {
	var b strings.Builder
	b.WriteString("# metadata local: store keys and values, format version 1 (see metadata/local.go): key-hex value-hex # what\n")
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s %s # %s\n", hex.EncodeToString(kv.key), hex.EncodeToString(kv.value), kv.comment)
	}
	return []byte(b.String())
}

func readGoldenLocal(t *testing.T) [][2][]byte {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenLocalFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenLocalFile, formatGoldenLocal(goldenLocalKVs()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(goldenLocalFile)
	if err != nil {
		t.Fatalf("%v (run `go test ./metadata -run TestGolden -update` once to create it)", err)
	}
	var out [][2][]byte
	for i, line := range strings.Split(string(text), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("%s line %d: %q", goldenLocalFile, i+1, line)
		}
		k, err1 := hex.DecodeString(f[0])
		v, err2 := hex.DecodeString(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s line %d: %v %v", goldenLocalFile, i+1, err1, err2)
		}
		out = append(out, [2][]byte{k, v})
	}
	return out
}

// TestGoldenLocalRecord: the committed keys and records decode to exactly
// the nodes written and re-encode to the same bytes; a store opened on
// them serves the same tree.
func TestGoldenLocalRecord(t *testing.T) {
	kvs := goldenLocalKVs()
	committed := readGoldenLocal(t)
	if len(committed) != len(kvs) {
		t.Fatalf("%s has %d keys, the golden values %d", goldenLocalFile, len(committed), len(kvs))
	}
	nodes := goldenLocalNodes()
	for i, kv := range kvs {
		k, v := committed[i][0], committed[i][1]
		if !bytes.Equal(k, kv.key) || !bytes.Equal(v, kv.value) {
			t.Errorf("%s: encoding gives %x = %x, committed %x = %x", kv.comment, kv.key, kv.value, k, v)
		}
		if i == 0 {
			continue
		}
		want := nodes[i-1]
		if string(k) != "n"+want.path {
			t.Errorf("%s: key %q", kv.comment, k)
		}
		got, err := decodeRecord(v)
		if err != nil || !sameRecord(got, want.node) {
			t.Errorf("%s: record %x decodes to %+v, %v; want %+v", kv.comment, v, got, err, want.node)
		}
	}
	// One record by hand, from the layout in local.go: format 1, uvarint
	// version 3, uvarint cversion 0, varint created, varint modified, value.
	rec := encodeRecord(nodes[3].node)
	wantHex := "01" + "03" + "00" + hex.EncodeToString(binaryVarint(1_700_000_000_001)) +
		hex.EncodeToString(binaryVarint(1_700_000_000_000+86_400_000)) + hex.EncodeToString(nodes[3].node.value)
	if hex.EncodeToString(rec) != wantHex {
		t.Errorf("record layout %x, the format says %s", rec, wantHex)
	}

	// A store opened on the committed keys.
	fsys := vfs.NewMem()
	const dir = "/store"
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: fsys, Logger: pebblelog.Logger{Log: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range committed {
		if err := db.Set(kv[0], kv[1], pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err := OpenLocal(dir, LocalOptionsWithFS(LocalOptions{}, fsys))
	if err != nil {
		t.Fatalf("open on the golden keys: %v", err)
	}
	defer srv.Close()
	s := srv.NewSession()
	ctx := context.Background()
	for _, n := range nodes {
		v, st, err := s.Get(ctx, n.path)
		if err != nil {
			t.Errorf("get %s: %v", n.path, err)
			continue
		}
		if !bytes.Equal(v, n.node.value) || st.Version != n.node.version || !st.Created.Equal(n.node.created) ||
			!st.Modified.Equal(n.node.modified) || st.Ephemeral {
			t.Errorf("get %s: %q %+v; want %q version %d created %v modified %v", n.path, v, st,
				n.node.value, n.node.version, n.node.created, n.node.modified)
		}
	}
	children, err := s.Children(ctx, "/")
	slices.Sort(children)
	if err != nil || !slices.Equal(children, []string{"admin", "ledgers", "old"}) {
		t.Errorf("children of /: %v, %v", children, err)
	}
	// cversion survives: the next sequential child of /ledgers is numbered 300.
	p, _, err := s.Create(ctx, "/ledgers/L", nil, CreateOptions{Sequential: true})
	if err != nil || p != "/ledgers/L0000000300" {
		t.Errorf("sequential create under /ledgers: %s, %v; want /ledgers/L0000000300", p, err)
	}
}

func binaryVarint(v int64) []byte {
	var b []byte
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}
