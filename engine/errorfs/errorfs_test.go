package errorfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"golang.org/x/sys/unix"
)

// workload is a small storage routine touching every kind of operation; the
// sweep below checks that a fault in any one of them surfaces as an error.
func workload(fs engine.FS) error {
	if err := fs.MkdirAll("/j", 0o755); err != nil {
		return err
	}
	f, err := fs.Create("/j/000001.log")
	if err != nil {
		return err
	}
	if err := f.Preallocate(0, 4096); err != nil {
		return errors.Join(err, f.Close())
	}
	for i := 0; i < 3; i++ {
		if _, err := f.Append([][]byte{[]byte(fmt.Sprintf("record-%d;", i))}); err != nil {
			return errors.Join(err, f.Close())
		}
	}
	if _, err := f.WriteAtSync([][]byte{[]byte("tail")}, f.Size()); err != nil {
		return errors.Join(err, f.Close())
	}
	buf := make([]byte, 9)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Truncate(f.Size()); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename("/j/000001.log", "/j/000002.log"); err != nil {
		return err
	}
	if err := fs.SyncDir("/j"); err != nil {
		return err
	}
	if _, err := fs.List("/j"); err != nil {
		return err
	}
	if _, err := fs.Stat("/j/000002.log"); err != nil {
		return err
	}
	_, err = fs.FreeSpace("/j")
	return err
}

func TestErrorSweep(t *testing.T) {
	for _, fault := range []errorfs.Fault{{}, {Err: unix.ENOSPC}, {Err: unix.ENOSPC, Short: true}} {
		t.Run(fmt.Sprint(fault.Err, fault.Short), func(t *testing.T) {
			for k := int64(0); ; k++ {
				fs := errorfs.Wrap(engine.NewMem(), errorfs.AtIndex(k, fault))
				err := workload(fs)
				if err == nil {
					if k != fs.Ops() {
						t.Fatalf("workload succeeded although op %d of %d failed", k, fs.Ops())
					}
					t.Logf("swept %d failure points", k)
					return
				}
				var inj *errorfs.InjectedError
				if !errors.As(err, &inj) || inj.Index != k {
					t.Fatalf("failing op %d surfaced as %v", k, err)
				}
				if fault.Err != nil && !errors.Is(err, fault.Err) {
					t.Fatalf("op %d: error %v does not unwrap to %v", k, err, fault.Err)
				}
			}
		})
	}
}

func TestShortWriteWritesAPrefix(t *testing.T) {
	mem := engine.NewMem()
	fs := errorfs.Wrap(mem, errorfs.OnOps(errorfs.Fault{Err: unix.ENOSPC, Short: true}, errorfs.OpWrite))
	f, err := mem.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	wf, err := fs.OpenReadWrite("/f")
	if err != nil {
		t.Fatal(err)
	}
	n, err := wf.WriteAt([][]byte{[]byte("abcd"), []byte("efgh")}, 0)
	if n != 4 || !errors.Is(err, unix.ENOSPC) || !engine.IsNoSpace(err) {
		t.Fatalf("short write: n=%d err=%v", n, err)
	}
	got, _ := engine.ReadFile(mem, "/f")
	if !bytes.Equal(got, []byte("abcd")) {
		t.Fatalf("file holds %q", got)
	}
}

func TestFailedSyncLeavesDataUnsynced(t *testing.T) {
	mem := engine.NewMem()
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	toggle := errorfs.NewToggle(errorfs.OnOps(errorfs.Fault{}, errorfs.OpSync))
	fs := errorfs.Wrap(mem, toggle)
	toggle.Set(false)
	f, err := fs.Create("/wal")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	toggle.Set(true)
	if _, err := f.WriteAtSync([][]byte{[]byte("entry")}, 0); !errors.Is(err, unix.EIO) {
		t.Fatalf("want EIO from the failed sync, got %v", err)
	}
	if err := f.Datasync(); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("datasync: %v", err)
	}
	got, _ := engine.ReadFile(mem.CrashClone(engine.CrashOptions{}), "/wal")
	if len(got) != 0 {
		t.Fatalf("data whose sync failed survived a crash: %q", got)
	}
}

func TestOnPathAndRandom(t *testing.T) {
	fs := errorfs.Wrap(engine.NewMem(), errorfs.OnPath("*.idx", errorfs.Fault{Err: unix.EROFS}, errorfs.OpCreate))
	if _, err := fs.Create("/a.log"); err != nil {
		t.Fatalf("unmatched path failed: %v", err)
	}
	_, err := fs.Create("/a.idx")
	if !errors.Is(err, unix.EROFS) || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("matched path: %v", err)
	}
	count := func(seed int64) int {
		fs := errorfs.Wrap(engine.NewMem(), errorfs.Random(seed, 0.3, errorfs.Fault{}))
		failed := 0
		for i := 0; i < 200; i++ {
			if _, err := fs.Stat("/"); err != nil {
				failed++
			}
		}
		return failed
	}
	a, b := count(7), count(7)
	if a != b || a < 30 || a > 90 {
		t.Fatalf("random injection not reproducible or off rate: %d vs %d of 200", a, b)
	}
}
