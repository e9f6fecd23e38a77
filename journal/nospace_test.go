package journal

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
)

// TestNoSpaceSweep fails operation k (k = 0, 1, 2, ...) with ENOSPC
// instead of EIO (issue 30). A full disk met on a preallocation, a new
// file or a write is not a failure: those adds fail with ErrNoSpace and
// the journal goes on, so later adds are acknowledged; ENOSPC from a sync
// stays a failure (ErrFailed). Either way a crash afterwards keeps every
// acknowledged entry.
func TestNoSpaceSweep(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipeline=%v", pipeline), func(t *testing.T) {
			opts := Options{MaxFileSize: 12 << 10, PreallocSize: 8 << 10, Pipeline: pipeline, NoFileReuse: true}
			resumed := 0
			for k := int64(0); ; k++ {
				done, res, err := noSpaceOnce(k, opts)
				if err != nil {
					t.Fatalf("ENOSPC at op %d: %v", k, err)
				}
				if res {
					resumed++
				}
				if done {
					if resumed == 0 {
						t.Fatal("no run went on after running out of space")
					}
					return
				}
			}
		})
	}
}

// noSpaceOnce runs one life with op k failing with ENOSPC; resumed says an
// add was acknowledged after an out-of-space failure.
func noSpaceOnce(k int64, opts Options) (done, resumed bool, err error) {
	base := engine.NewMem()
	fs := errorfs.Wrap(base, errorfs.AtIndex(k, errorfs.Fault{Err: unix.ENOSPC, Short: true}))
	j, oerr := Open(fs, "/journal", opts, func(Entry) error { return nil })
	if oerr != nil {
		return false, false, nil // Open may fail on a full disk; nothing was acknowledged
	}
	acked := map[int64]Mark{}
	failed, noSpace := false, false
	for e := int64(100); e < 140; e++ {
		m, aerr := addWait(j, 2, e)
		switch {
		case aerr == nil && failed:
			return false, false, fmt.Errorf("entry %d acknowledged after the journal failed", e)
		case aerr == nil:
			acked[e] = m
			resumed = resumed || noSpace
		case errors.Is(aerr, ErrNoSpace) && !errors.Is(aerr, ErrFailed):
			noSpace = true
		case errors.Is(aerr, ErrFailed) && errors.Is(aerr, unix.ENOSPC):
			failed = true
		default:
			return false, false, fmt.Errorf("entry %d: unexpected error %w", e, aerr)
		}
	}
	_ = j.Close()
	return fs.Ops() <= k, resumed, checkDurable(base, opts, acked)
}

// TestNoSpaceThenSpaceFreed fills a small disk (the mem backend's
// capacity) until adds fail with ErrNoSpace, frees space, and checks that
// adds go on without reopening and that every acknowledged entry replays.
func TestNoSpaceThenSpaceFreed(t *testing.T) {
	for name, opts := range modes() {
		t.Run(name, func(t *testing.T) {
			opts.MaxFileSize, opts.PreallocSize, opts.NoFileReuse = 64<<10, 16<<10, true
			base := engine.NewMemWithOptions(engine.MemOptions{Capacity: 1 << 20})
			j, _ := openT(t, base, opts)
			filler := fillDisk(t, base, "/filler", 200<<10)
			acked := map[int64]Mark{}
			e := int64(100)
			for ; ; e++ {
				m, err := addWait(j, 2, e)
				if err != nil {
					if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrFailed) {
						t.Fatalf("entry %d on a full disk: %v, want ErrNoSpace", e, err)
					}
					break
				}
				acked[e] = m
				if e > 10000 {
					t.Fatal("the disk never filled")
				}
			}
			if err := base.Remove(filler); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 50; i++ {
				e++
				m, err := addWait(j, 2, e)
				if err != nil {
					t.Fatalf("entry %d after space was freed: %v", e, err)
				}
				acked[e] = m
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if err := checkDurable(base, opts, acked); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSmallDiskStarts: the first file's preallocation is sized to the free
// space, so a disk smaller than PreallocSize still opens (before, a 16 MiB
// step on a 4 MiB disk failed with ENOSPC).
func TestSmallDiskStarts(t *testing.T) {
	base := engine.NewMemWithOptions(engine.MemOptions{Capacity: 4 << 20})
	j, _ := openT(t, base, Options{PreallocSize: 16 << 20})
	if _, err := addWait(j, 1, 0); err != nil {
		t.Fatalf("add on a small disk: %v", err)
	}
	if free, _ := base.FreeSpace("/"); free < 3<<20 {
		t.Fatalf("the journal took %d of 4 MiB; want at most an eighth of the free space", 4<<20-free)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSpaceFuncRefusesGrowth: the bookie's SpaceFunc refusing a
// preallocation fails the adds with ErrNoSpace, and growth resumes once it
// allows it.
func TestSpaceFuncRefusesGrowth(t *testing.T) {
	refuse := true
	opts := Options{PreallocSize: 8 << 10, Space: func(dir string, need, want int64) (int64, error) {
		if refuse && need > 0 {
			return 0, fmt.Errorf("%w: %s is over the threshold", ErrNoSpace, dir)
		}
		return want, nil
	}}
	j, _ := openT(t, engine.NewMem(), opts)
	var err error
	e := int64(0)
	for ; err == nil && e < 100; e++ {
		_, err = addWait(j, 1, e)
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("add past the allowed space: %v, want ErrNoSpace", err)
	}
	refuse = false
	if _, err := addWait(j, 1, e); err != nil {
		t.Fatalf("add once growth is allowed: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// fillDisk writes a file of n-byte chunks until the disk is full and
// returns its name.
func fillDisk(t *testing.T, fs engine.FS, name string, chunk int) string {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([][]byte, 1)
	for off := int64(0); chunk >= 512; {
		buf[0] = make([]byte, chunk)
		if _, err := f.WriteAt(buf, off); err != nil {
			if !engine.IsNoSpace(err) {
				t.Fatal(err)
			}
			chunk /= 2
			continue
		}
		off += int64(chunk)
	}
	return name
}
