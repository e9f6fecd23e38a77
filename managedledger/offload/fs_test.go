package offload

import (
	"context"
	"errors"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/ledger"
)

// Tests of the filesystem driver: its files, its atomicity, its checks.

func TestLayout(t *testing.T) {
	o, mem := newMemFS(t, Config{})
	k := testKey(42)
	if err := o.Offload(context.Background(), k, map[string]string{"a": "b"}, newSource(42, [][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	want := memRoot + "/public/default/persistent/t1/42-u42-ab12.ledger"
	if _, err := mem.Stat(want); err != nil {
		t.Fatalf("copy not at %s: %v", want, err)
	}
	data, err := engine.ReadFile(mem, want)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(data, encodeCopy(42, map[string]string{"a": "b"}, [][]byte{[]byte("x")})) {
		t.Fatal("the file is not what encodeCopy makes")
	}
}

// TestTempFiles: a temporary file a crash left is ignored by Open and
// removed by the next Offload or by Delete of the same key.
func TestTempFiles(t *testing.T) {
	ctx := context.Background()
	o, mem := newMemFS(t, Config{})
	k := testKey(3)
	_, final, tmp := o.paths(k)
	junk := func() {
		t.Helper()
		writeFile(t, o, mem, k, nil)
		if err := mem.Rename(final, tmp); err != nil {
			t.Fatal(err)
		}
	}
	junk()
	if _, err := o.Open(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open with only a temp file: %v, want ErrNotFound", err)
	}
	if err := o.Offload(ctx, k, nil, newSource(k.LedgerID, [][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	if names := listDir(t, o, k); !slices.Equal(names, []string{k.copyFileName()}) {
		t.Fatalf("after offload the directory holds %v", names)
	}
	k2 := testKey(4)
	k = k2
	_, final, tmp = o.paths(k)
	junk()
	if err := o.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if names := listDir(t, o, k); slices.Contains(names, k.copyFileName()+tempSuffix) {
		t.Fatalf("delete left the temp file: %v", names)
	}
}

// TestFaultSweep fails the file system's operation 0, 1, 2, ... of an
// Offload until one succeeds. Each failure must surface, leave no copy and
// no temp file, and a retry must then succeed; and a crash right after the
// failure must leave no copy or a complete one, never a corrupt one.
func TestFaultSweep(t *testing.T) {
	payloads := randomPayloads(rand.New(rand.NewSource(5)), 7, 3000)
	k := testKey(8)
	for i := int64(0); ; i++ {
		mem := engine.NewMem()
		efs := errorfs.Wrap(mem, errorfs.AtIndex(i, errorfs.Fault{Short: i%2 == 0}))
		o, err := newFilesystem(Config{FS: efs, Root: memRoot, BatchEntries: 2})
		if err != nil {
			t.Fatal(err)
		}
		err = o.Offload(context.Background(), k, nil, newSource(k.LedgerID, payloads))
		if err == nil {
			if i < efs.Ops() {
				t.Fatalf("op %d of %d failed but Offload succeeded", i, efs.Ops())
			}
			checkCrashed(t, mem, k, payloads, true)
			t.Logf("swept %d operations", i)
			return
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %d: %v, want the injected fault", i, err)
		}
		checkCrashed(t, mem, k, payloads, false)
		if names := listDir(t, o, k); len(names) != 0 {
			t.Fatalf("op %d: failed offload left %v", i, names)
		}
		if _, err := o.Open(context.Background(), k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("op %d: open after a failed offload: %v", i, err)
		}
		if err := o.Offload(context.Background(), k, nil, newSource(k.LedgerID, payloads)); err != nil {
			t.Fatalf("op %d: retry: %v", i, err)
		}
		checkCopy(t, o, k, payloads, nil)
	}
}

// TestCrashAtEveryOp simulates a power failure before each file-system
// operation of an Offload (keeping only synced state, with unsynced writes
// torn at random): the machine finds no copy or a complete one, and a retry
// of the same key then succeeds and leaves no temp file. After Offload
// returns, the copy survives a crash.
func TestCrashAtEveryOp(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	payloads := randomPayloads(rng, 9, 2000)
	k := testKey(10)
	mem := engine.NewMem()
	var crashes []*engine.MemFS
	efs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(errorfs.Op, string, int64) (errorfs.Fault, bool) {
		crashes = append(crashes, mem.CrashClone(engine.CrashOptions{Rand: rng}))
		return errorfs.Fault{}, false
	}))
	o, err := newFilesystem(Config{FS: efs, Root: memRoot, BatchEntries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Offload(context.Background(), k, nil, newSource(k.LedgerID, payloads)); err != nil {
		t.Fatal(err)
	}
	checkCrashed(t, mem, k, payloads, true)
	for i, crashed := range crashes {
		if !checkCrashed(t, crashed, k, payloads, false) {
			continue
		}
		// Nothing survived: the retry on the crashed machine must work.
		again, _ := newFilesystem(Config{FS: crashed, Root: memRoot})
		if err := again.Offload(context.Background(), k, nil, newSource(k.LedgerID, payloads)); err != nil {
			t.Fatalf("crash before op %d: retry: %v", i, err)
		}
		if names := listDir(t, again, k); !slices.Equal(names, []string{k.copyFileName()}) {
			t.Fatalf("crash before op %d: after the retry the directory holds %v", i, names)
		}
	}
}

// checkCrashed crashes mem and checks that the machine finds k's complete
// copy, or (unless mustExist) none. It reports whether there was none.
func checkCrashed(t *testing.T, mem *engine.MemFS, k Key, payloads [][]byte, mustExist bool) bool {
	t.Helper()
	crashed := mem.CrashClone(engine.CrashOptions{})
	o, _ := newFilesystem(Config{FS: crashed, Root: memRoot})
	r, err := o.Open(context.Background(), k)
	if errors.Is(err, ErrNotFound) && !mustExist {
		return true
	}
	if err != nil {
		t.Fatalf("after a crash: %v", err)
	}
	defer r.Close()
	if err := compareReader(r, k, payloads, nil); err != nil {
		t.Fatalf("after a crash: %v", err)
	}
	return false
}

// smallCopy is a file of a few entries, for the corruption tests.
func smallCopy() []byte {
	return encodeCopy(5, map[string]string{"k": "v"}, [][]byte{[]byte("hello"), {}, []byte("world!")})
}

// openAndReadAll opens k and reads all of it, returning the first error.
func openAndReadAll(o Offloader, k Key) error {
	r, err := o.Open(context.Background(), k)
	if err != nil {
		return err
	}
	defer r.Close()
	if r.LastEntryID() >= 0 {
		_, err = r.Read(context.Background(), 0, r.LastEntryID())
	}
	return err
}

// TestEveryByteFlipDetected: every byte of a copy is covered by a check,
// so flipping any one makes Open or Read fail with ErrCorrupt.
func TestEveryByteFlipDetected(t *testing.T) {
	good := smallCopy()
	k := Key{ManagedLedger: "t", LedgerID: 5, UID: "u"}
	for i := range good {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := slices.Clone(good)
			bad[i] ^= mask
			o, mem := newMemFS(t, Config{})
			writeFile(t, o, mem, k, bad)
			err := openAndReadAll(o, k)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, engine.ErrCorruption) || errors.Is(err, ErrNotFound) {
				t.Fatalf("byte %d ^ %#x: %v, want ErrCorrupt", i, mask, err)
			}
		}
	}
}

func TestCorruptEntryNamed(t *testing.T) {
	good := smallCopy()
	k := Key{ManagedLedger: "t", LedgerID: 5, UID: "u"}
	o, mem := newMemFS(t, Config{})
	bad := slices.Clone(good)
	bad[len(bad)-footerSize-3*indexEntrySize-1] ^= 1 // the last byte of entry 2's payload
	writeFile(t, o, mem, k, bad)
	r := mustOpen(t, o, k)
	defer r.Close()
	if _, err := r.Read(context.Background(), 0, 1); err != nil {
		t.Fatalf("entries before the damage: %v", err)
	}
	_, err := r.Read(context.Background(), 0, 2)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "entry 2") || !strings.Contains(err.Error(), k.String()) {
		t.Fatalf("read of a damaged entry: %v, want ErrCorrupt naming the key and entry 2", err)
	}
}

// TestTruncatedOrExtended: any prefix of a copy, or a copy with bytes
// after it, is ErrCorrupt (not ErrNotFound, not a panic).
func TestTruncatedOrExtended(t *testing.T) {
	good := smallCopy()
	k := Key{ManagedLedger: "t", LedgerID: 5, UID: "u"}
	var files [][]byte
	for n := 0; n < len(good); n++ {
		files = append(files, good[:n])
	}
	files = append(files, append(slices.Clone(good), 0), append(slices.Clone(good), good...))
	for i, data := range files {
		o, mem := newMemFS(t, Config{})
		writeFile(t, o, mem, k, data)
		if err := openAndReadAll(o, k); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("file %d (%d bytes): %v, want ErrCorrupt", i, len(data), err)
		}
	}
}

// TestHostileLengths: footers and headers whose lengths claim far more
// than the file holds, with valid checksums, are ErrCorrupt and allocate
// nothing near what they claim.
func TestHostileLengths(t *testing.T) {
	k := Key{ManagedLedger: "t", LedgerID: 5, UID: "u"}
	header := encodeHeader(5, []byte("{}"))
	huge := [][]byte{
		append(slices.Clone(header), encodeTrailer(5, make([]uint64, 0), 1<<62, 0)...),
		forgeFooter(header, 5, uint64(len(header)), 1<<60, 0),
		forgeFooter(header, 5, uint64(len(header)), 0, 1<<62),
		forgeMetaLen(header, 1<<31),
		forgeMetaLen(header, MaxMetaSize),
	}
	for i, data := range huge {
		o, mem := newMemFS(t, Config{})
		writeFile(t, o, mem, k, data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := openAndReadAll(o, k)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("case %d: %v, want ErrCorrupt", i, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Fatalf("case %d: allocated %d bytes", i, grew)
		}
	}
}

// forgeFooter returns header followed by a footer with the given fields
// and a valid checksum (over an empty index).
func forgeFooter(header []byte, ledgerID int64, indexOffset, count, total uint64) []byte {
	f := encodeTrailer(ledgerID, nil, indexOffset, total)
	le.PutUint64(f[8:], count)
	le.PutUint32(f[footerCRCEnd:], crc32c.Checksum(f[:footerCRCEnd]))
	return append(slices.Clone(header), f...)
}

// forgeMetaLen returns a valid empty copy whose header claims metaLen.
func forgeMetaLen(header []byte, metaLen uint32) []byte {
	h := slices.Clone(header)
	le.PutUint32(h[12:], metaLen)
	return append(h, encodeTrailer(5, nil, uint64(len(h)), 0)...)
}

func TestBatching(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	big := randomPayloads(rng, 20, 0)
	for i := range big {
		big[i] = make([]byte, 1<<20)
	}
	cases := []struct {
		name     string
		cfg      Config
		payloads [][]byte
		maxRange int64 // entries per read after the first
	}{
		{"small", Config{}, randomPayloads(rng, 350, 50), DefaultBatchEntries},
		{"1MiB", Config{BatchEntries: 5}, big, DefaultBatchBytes >> 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, _ := newMemFS(t, c.cfg)
			k := testKey(1)
			src := newSource(k.LedgerID, c.payloads)
			if err := o.Offload(context.Background(), k, nil, src); err != nil {
				t.Fatal(err)
			}
			for _, rg := range src.ranges[1:] {
				if n := rg[1] - rg[0] + 1; n > c.maxRange {
					t.Fatalf("read %d..%d: %d entries, want at most %d", rg[0], rg[1], n, c.maxRange)
				}
			}
			checkCopy(t, o, k, c.payloads, nil)
		})
	}
}

// TestIOErrorsAreNotCorruption: a failing disk is an I/O error, neither
// ErrCorrupt nor ErrNotFound, so the caller retries instead of giving up
// on the ledger or skipping it.
func TestIOErrorsAreNotCorruption(t *testing.T) {
	ctx := context.Background()
	mem := engine.NewMem()
	toggle := errorfs.NewToggle(errorfs.OnOps(errorfs.Fault{}, errorfs.OpRead, errorfs.OpRemove))
	toggle.Set(false)
	o, err := newFilesystem(Config{FS: errorfs.Wrap(mem, toggle), Root: memRoot})
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(1)
	if err := o.Offload(ctx, k, nil, newSource(1, [][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, o, k)
	defer r.Close()
	toggle.Set(true)
	_, openErr := o.Open(ctx, k)
	_, readErr := r.Read(ctx, 0, 0)
	deleteErr := o.Delete(ctx, k)
	for what, err := range map[string]error{"open": openErr, "read": readErr, "delete": deleteErr} {
		if !errors.Is(err, errorfs.ErrInjected) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
			t.Errorf("%s on a failing disk: %v", what, err)
		}
	}
	toggle.Set(false)
	checkCopy(t, o, k, [][]byte{[]byte("x")}, nil)
}

// TestCleanupFailure: when an Offload fails and so does the removal of its
// temporary file, the error says so, Open still finds nothing, and Delete
// removes the leftover.
func TestCleanupFailure(t *testing.T) {
	ctx := context.Background()
	mem := engine.NewMem()
	toggle := errorfs.NewToggle(errorfs.OnOps(errorfs.Fault{}, errorfs.OpSync, errorfs.OpRemove))
	o, err := newFilesystem(Config{FS: errorfs.Wrap(mem, toggle), Root: memRoot})
	if err != nil {
		t.Fatal(err)
	}
	k := testKey(2)
	err = o.Offload(ctx, k, nil, newSource(2, [][]byte{[]byte("x")}))
	if !errors.Is(err, errorfs.ErrInjected) || !strings.Contains(err.Error(), "Delete the key") {
		t.Fatalf("offload with failing sync and cleanup: %v", err)
	}
	toggle.Set(false)
	if names := listDir(t, o, k); !slices.Equal(names, []string{k.copyFileName() + tempSuffix}) {
		t.Fatalf("directory holds %v, want the temp file", names)
	}
	if _, err := o.Open(ctx, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open: %v", err)
	}
	if err := o.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if names := listDir(t, o, k); len(names) != 0 {
		t.Fatalf("after delete the directory holds %v", names)
	}
}

// TestConcurrentOffloadOfOneKey: a second Offload of a key in progress is
// ErrBusy, and the first completes untouched.
func TestConcurrentOffloadOfOneKey(t *testing.T) {
	o, _ := newMemFS(t, Config{BatchEntries: 1})
	k := testKey(3)
	inner := newSource(3, [][]byte{[]byte("a"), []byte("b")})
	src := &hookSource{fakeSource: inner, hook: func() {
		if err := o.Offload(context.Background(), k, nil, newSource(3, nil)); !errors.Is(err, ErrBusy) {
			t.Errorf("offload during an offload of the same key: %v, want ErrBusy", err)
		}
	}}
	if err := o.Offload(context.Background(), k, nil, src); err != nil {
		t.Fatal(err)
	}
	checkCopy(t, o, k, inner.payloads, nil)
}

// hookSource calls hook before its first read.
type hookSource struct {
	*fakeSource
	hook func()
	once bool
}

func (s *hookSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if !s.once {
		s.once = true
		s.hook()
	}
	return s.fakeSource.Read(ctx, first, last)
}
