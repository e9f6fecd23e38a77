package engine_test

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"golang.org/x/sys/unix"
)

func TestCrashKeepsOnlySyncedData(t *testing.T) {
	fs := engine.NewMem()
	must(t, fs.MkdirAll("/d", 0o755))
	must(t, fs.SyncDir("/"))
	f, err := fs.Create("/d/f")
	must(t, err)
	_, err = f.WriteAt([][]byte{[]byte("synced")}, 0)
	must(t, err)
	must(t, f.Datasync())
	must(t, fs.SyncDir("/d"))
	_, err = f.Append([][]byte{[]byte("-lost")})
	must(t, err)

	after := fs.CrashClone(engine.CrashOptions{})
	if got := readAll(t, after, "/d/f"); string(got) != "synced" {
		t.Fatalf("after crash: %q, want only the synced bytes", got)
	}
	// The original keeps running with everything it wrote.
	if got := readAll(t, fs, "/d/f"); string(got) != "synced-lost" {
		t.Fatalf("original changed: %q", got)
	}
}

func TestCrashDropsEntriesOfUnsyncedDirectories(t *testing.T) {
	fs := engine.NewMem()
	must(t, fs.MkdirAll("/d", 0o755))
	must(t, fs.SyncDir("/"))
	f, err := fs.Create("/d/new")
	must(t, err)
	_, err = f.WriteAtSync([][]byte{[]byte("data")}, 0)
	must(t, err)
	// Data synced but the directory entry never was: the file is gone.
	if _, err := fs.CrashClone(engine.CrashOptions{}).Stat("/d/new"); !engine.IsNotExist(err) {
		t.Fatalf("file with unsynced dir entry survived the crash: %v", err)
	}
	must(t, fs.SyncDir("/d"))
	if got := readAll(t, fs.CrashClone(engine.CrashOptions{}), "/d/new"); string(got) != "data" {
		t.Fatalf("synced file after crash: %q", got)
	}
	// A directory that was never synced into its parent loses its children.
	must(t, fs.MkdirAll("/e", 0o755))
	g, err := fs.Create("/e/g")
	must(t, err)
	_, err = g.WriteAtSync([][]byte{[]byte("x")}, 0)
	must(t, err)
	must(t, fs.SyncDir("/e"))
	if _, err := fs.CrashClone(engine.CrashOptions{}).Stat("/e/g"); !engine.IsNotExist(err) {
		t.Fatalf("child of an unsynced directory survived: %v", err)
	}
}

func TestCrashRenameAndRemoveNeedSyncDir(t *testing.T) {
	fs := engine.NewMem()
	must(t, fs.MkdirAll("/d", 0o755))
	must(t, fs.SyncDir("/"))
	must(t, engine.WriteFileAtomic(fs, "/d/state", []byte("v1")))
	must(t, fs.Remove("/d/state"))
	if got := readAll(t, fs.CrashClone(engine.CrashOptions{}), "/d/state"); string(got) != "v1" {
		t.Fatalf("unsynced remove was durable: %q", got)
	}
	must(t, fs.SyncDir("/d"))
	if _, err := fs.CrashClone(engine.CrashOptions{}).Stat("/d/state"); !engine.IsNotExist(err) {
		t.Fatalf("synced remove undone by crash: %v", err)
	}
}

// TestCrashTornWritesArePrefixes checks the tearing model: what survives is
// the synced state plus a prefix of the unsynced byte stream.
func TestCrashTornWritesArePrefixes(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		fs := engine.NewMem()
		must(t, fs.SyncDir("/"))
		f, err := fs.Create("/log")
		must(t, err)
		must(t, fs.SyncDir("/"))
		synced := randBytes(rng, 1+rng.Intn(100))
		_, err = f.WriteAtSync([][]byte{synced}, 0)
		must(t, err)
		var unsynced []byte
		for i := 0; i < 1+rng.Intn(5); i++ {
			rec := randBytes(rng, 1+rng.Intn(50))
			_, err := f.Append([][]byte{rec})
			must(t, err)
			unsynced = append(unsynced, rec...)
		}
		got := readAll(t, fs.CrashClone(engine.CrashOptions{Rand: rng}), "/log")
		full := append(append([]byte(nil), synced...), unsynced...)
		if len(got) < len(synced) || !bytes.Equal(got, full[:len(got)]) {
			t.Fatalf("seed %d: crash left %d bytes that are not synced data plus a prefix of the rest", seed, len(got))
		}
	}
}

// TestWriteFileAtomicCrashAtEveryStep crashes after every operation of an
// atomic replace (by failing op k and crashing): the file must hold the old
// or the new contents, never a mix or nothing.
func TestWriteFileAtomicCrashAtEveryStep(t *testing.T) {
	for k := int64(0); ; k++ {
		base := engine.NewMem()
		must(t, base.MkdirAll("/d", 0o755))
		must(t, base.SyncDir("/"))
		must(t, engine.WriteFileAtomic(base, "/d/cookie", []byte("old-contents")))
		fs := errorfs.Wrap(base, errorfs.AtIndex(k, errorfs.Fault{}))
		err := engine.WriteFileAtomic(fs, "/d/cookie", []byte("new"))
		for _, tear := range []*rand.Rand{nil, rand.New(rand.NewSource(k))} {
			got := readAll(t, base.CrashClone(engine.CrashOptions{Rand: tear}), "/d/cookie")
			if string(got) != "old-contents" && string(got) != "new" {
				t.Fatalf("fail at op %d: after crash the file holds %q", k, got)
			}
			if err == nil && string(got) != "new" {
				t.Fatalf("op %d: success reported but crash lost the new contents: %q", k, got)
			}
		}
		if err == nil {
			if k < 4 {
				t.Fatalf("atomic write succeeded with op %d failing: the failure was swallowed", k)
			}
			return
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("fail at op %d surfaced as %v, not the injected error", k, err)
		}
	}
}

func TestMemRenameDirectoryRules(t *testing.T) {
	fs := engine.NewMem()
	must(t, fs.MkdirAll("/x/y", 0o755))
	must(t, fs.MkdirAll("/z/w", 0o755))
	if err := fs.Rename("/x", "/x/y/inside"); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("rename into own subtree: %v", err)
	}
	if err := fs.Rename("/x", "/z"); !errors.Is(err, unix.ENOTEMPTY) {
		t.Fatalf("rename onto non-empty dir: %v", err)
	}
	must(t, fs.Rename("/x", "/moved"))
	if names, err := fs.List("/moved"); err != nil || len(names) != 1 || names[0] != "y" {
		t.Fatalf("subtree after rename: %v %v", names, err)
	}
}
