package bookie

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/magnetar-io/magnetar/bookie/client"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/journal"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// smallDisk is a bookie on one small disk (the mem backend's capacity)
// holding its journal and ledger directories, with real ledger storage.
type smallDisk struct {
	t        *testing.T
	fs       engine.FS
	capacity uint64
	index    vfs.FS // the storage's index survives reopening
	core     *Core
	check    time.Duration
	// nearFull: the disk measures 92% used, between the low-water mark
	// (90%) and the threshold (95%): not full enough to turn the bookie
	// read-only by itself, too full for the checker to turn it writable
	// again, as a disk that just answered ENOSPC is.
	nearFull atomic.Bool
}

func newSmallDisk(t *testing.T, fs engine.FS, capacity uint64) *smallDisk {
	d := &smallDisk{t: t, fs: fs, capacity: capacity, index: vfs.NewMem(), check: 20 * time.Millisecond}
	d.open()
	t.Cleanup(func() {
		if d.core != nil {
			d.core.Close()
		}
	})
	return d
}

func (d *smallDisk) usage(string) (uint64, uint64, error) {
	if d.nearFull.Load() {
		return d.capacity / 100 * 8, d.capacity, nil
	}
	free, err := d.fs.FreeSpace("/")
	return free, d.capacity, err
}

func (d *smallDisk) open() {
	d.t.Helper()
	open := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
		return entrylog.Open(d.fs, []string{"/ledgers"}, entrylog.Options{IndexFS: d.index, Checkpointer: cp,
			LogSizeLimit: 1 << 20, PreallocSize: 256 << 10, WriteCacheMaxSize: 2 << 20, FlushInterval: 20 * time.Millisecond,
			GCWaitTime: -1, Logger: quietLogger()})
	}
	core, err := OpenCore(d.fs, []string{"/journal"}, journal.Options{PreallocSize: 512 << 10, MaxFileSize: 2 << 20,
		Logger: quietLogger()}, open, Options{LedgerDirs: []string{"/ledgers"}, DiskUsage: d.usage,
		DiskCheckInterval: d.check, FlushInterval: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		d.t.Fatalf("open bookie: %v", err)
	}
	d.core = core
}

func (d *smallDisk) reopen() {
	d.t.Helper()
	if err := d.core.Close(); err != nil && !isNoSpace(err) {
		d.t.Fatalf("close: %v", err)
	}
	d.core = nil
	d.open()
}

// fillUntilRefused adds 4 KiB entries to ledger l from entry `from` until
// one is refused; it returns the next entry id. The refusal must be the
// read-only answer, never an I/O error.
func (d *smallDisk) fillUntilRefused(l, from int64) int64 {
	d.t.Helper()
	payload := strings.Repeat("x", 4<<10)
	for e := from; e < from+20000; e++ {
		err := handleAdd(d.core, l, e, payload)
		if err == nil {
			continue
		}
		if !errors.Is(err, client.ErrReadOnly) {
			d.t.Fatalf("add %d on a filling disk: %v, want %v", e, err, client.ErrReadOnly)
		}
		return e
	}
	d.t.Fatal("the disk never filled")
	return 0
}

// readAll reads entries [0, to) of ledger l.
func (d *smallDisk) readAll(l, to int64) {
	d.t.Helper()
	for e := int64(0); e < to; e++ {
		if _, err := handleRead(d.core, l, e); err != nil {
			d.t.Fatalf("read %d/%d (of %d acknowledged): %v", l, e, to, err)
		}
	}
}

// waitWritable waits for the bookie to turn writable and says how long it took.
func (d *smallDisk) waitWritable(within time.Duration) time.Duration {
	d.t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if ro, _ := d.core.ReadOnly(); !ro {
			return time.Since(start)
		}
		time.Sleep(d.check / 4)
	}
	_, why := d.core.ReadOnly()
	d.t.Fatalf("still read-only %v after space was freed: %s", within, why)
	return 0
}

func (d *smallDisk) mustBeOutOfSpace() {
	d.t.Helper()
	ro, why := d.core.ReadOnly()
	if !ro || !d.core.OutOfSpace() || !strings.HasPrefix(why, OutOfSpaceReason) || d.core.writesFailed.Load() {
		d.t.Fatalf("read-only=%v out-of-space=%v failed=%v why=%q; want out of space, not failed",
			ro, d.core.OutOfSpace(), d.core.writesFailed.Load(), why)
	}
}

// TestFullDiskIsAStateNotAFailure (issue 30): a bookie whose disk fills
// turns read-only for lack of space (the threshold or ENOSPC, never a
// failure), keeps serving reads, turns writable by itself within a few
// check intervals once space is freed, and restarts on the nearly full
// disk with nothing acknowledged lost. Before, the first ENOSPC on a
// preallocation failed the journal for good.
func TestFullDiskIsAStateNotAFailure(t *testing.T) {
	const capacity = 24 << 20
	mem := engine.NewMemWithOptions(engine.MemOptions{Capacity: capacity})
	filler := fillFile(t, mem, "/filler", 8<<20)
	d := newSmallDisk(t, mem, capacity)
	next := d.fillUntilRefused(1, 0)
	d.mustBeOutOfSpace()
	d.readAll(1, next)
	if free, _ := mem.FreeSpace("/"); free == 0 {
		t.Fatal("the bookie used the last byte: the threshold should stop it first")
	}
	if err := mem.Remove(filler); err != nil {
		t.Fatal(err)
	}
	took := d.waitWritable(50 * d.check)
	t.Logf("writable again %v after space was freed (diskCheckInterval %v)", took, d.check)
	if err := handleAdd(d.core, 1, next, "after"); err != nil {
		t.Fatalf("add after space was freed: %v", err)
	}
	next++
	// Fill again and restart on the nearly full disk.
	next = d.fillUntilRefused(1, next)
	d.reopen()
	d.readAll(1, next)
}

// TestJournalDirectoryIsChecked: a full journal disk makes the bookie
// read-only (before, only ledger directories were checked), and the
// reason names the journal directory.
func TestJournalDirectoryIsChecked(t *testing.T) {
	usage := map[string]float64{"/journal": 0.5, "/ledgers": 0.5}
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	set := func(dir string, u float64) { <-mu; usage[dir] = u; mu <- struct{}{} }
	open := func(entrylog.Checkpointer) (entrylog.Storage, error) { return entrylog.NewMemory(nil), nil }
	core, err := OpenCore(engine.NewMem(), []string{"/journal"}, journal.Options{Logger: quietLogger()}, open,
		Options{LedgerDirs: []string{"/ledgers"}, DiskCheckInterval: 10 * time.Millisecond, Logger: quietLogger(),
			DiskUsage: func(dir string) (uint64, uint64, error) {
				<-mu
				defer func() { mu <- struct{}{} }()
				return uint64((1 - usage[dir]) * (1 << 40)), 1 << 40, nil
			}})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	set("/journal", 0.96)
	waitFor(t, "read-only", func() bool { ro, _ := core.ReadOnly(); return ro })
	if _, why := core.ReadOnly(); !strings.Contains(why, "journal directory /journal") || !core.OutOfSpace() {
		t.Fatalf("reason %q, want the journal directory named", why)
	}
	if err := handleAdd(core, 1, 0, "x"); !errors.Is(err, client.ErrReadOnly) {
		t.Fatalf("add to a bookie with a full journal disk: %v", err)
	}
	set("/journal", 0.92) // between the low-water mark and the threshold: still read-only
	time.Sleep(50 * time.Millisecond)
	if ro, _ := core.ReadOnly(); !ro {
		t.Fatal("writable again above the low-water mark")
	}
	set("/journal", 0.85)
	waitFor(t, "writable", func() bool { ro, _ := core.ReadOnly(); return !ro })
	if err := handleAdd(core, 1, 0, "x"); err != nil {
		t.Fatalf("add once the journal disk is below the low-water mark: %v", err)
	}
	var info *bkproto.Response
	core.Handle(&bkproto.Request{Op: bkproto.OpInfo}, func(r *bkproto.Response) { info = r })
	if info.InfoFlags&(bkproto.InfoReadOnly|bkproto.InfoOutOfSpace) != 0 {
		t.Fatalf("info flags %b on a writable bookie", info.InfoFlags)
	}
}

// TestNoSpaceFaultIsOutOfSpace: ENOSPC injected into the journal's
// preallocations and writes, and into the entry logs', is answered as
// read-only (BookKeeper's EREADONLY), not an I/O error, turns the bookie
// read-only for lack of space, and it is writable again once the check
// finds the disks below the low-water mark. EIO stays a failure.
func TestNoSpaceFaultIsOutOfSpace(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		op   errorfs.Op
	}{
		{"journal-preallocate", "/journal", errorfs.OpPreallocate},
		{"journal-write", "/journal", errorfs.OpWrite},
		{"journal-create", "/journal", errorfs.OpCreate},
		{"entrylog-write", "*.elog", errorfs.OpWrite},
		{"entrylog-preallocate", "*.elog", errorfs.OpPreallocate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := errorfs.NewToggle(errorfs.OnPath(tc.path, errorfs.Fault{Err: unix.ENOSPC, Short: true}, tc.op))
			faults.Set(false)
			d := &smallDisk{t: t, fs: errorfs.Wrap(engine.NewMem(), faults), capacity: 1 << 40, index: vfs.NewMem(),
				check: 20 * time.Millisecond}
			d.open()
			defer d.core.Close()
			if err := handleAdd(d.core, 1, 0, "before"); err != nil {
				t.Fatal(err)
			}
			// The disk fills: ENOSPC, and a measure just under the
			// threshold, so the ENOSPC is what turns the bookie read-only,
			// and the checker keeps it so until space is back (with the
			// measure still showing space, it turned writable again within
			// one 20 ms check, before a loaded test's poll saw it).
			d.nearFull.Store(true)
			faults.Set(true)
			next := d.fillUntilRefused(1, 1)
			waitFor(t, "read-only", func() bool { ro, _ := d.core.ReadOnly(); return ro })
			if _, why := d.core.ReadOnly(); !strings.HasPrefix(why, OutOfSpaceReason) || strings.Contains(why, "diskUsageThreshold") {
				t.Fatalf("read-only because %q, want the ENOSPC", why)
			}
			faults.Set(false)
			d.nearFull.Store(false)
			d.readAll(1, next)
			d.waitWritable(50 * d.check)
			if d.core.writesFailed.Load() {
				t.Fatal("ENOSPC failed the bookie for good")
			}
			if err := handleAdd(d.core, 1, next, "after"); err != nil {
				t.Fatalf("add after the fault was lifted: %v", err)
			}
			d.reopen()
			d.readAll(1, next+1)
		})
	}
}

// TestReadOnlyReasonPublished: the registration carries why a bookie is
// read-only and whether for lack of space, so brokers can name the cause.
func TestReadOnlyReasonPublished(t *testing.T) {
	tb := startTestBookie(t, nil, nil, ServerOptions{})
	tb.setDiskUsed(0.97)
	waitFor(t, "out of space", func() bool { return tb.core.OutOfSpace() })
	ro, why := tb.core.ReadOnly()
	if !ro || !strings.HasPrefix(why, OutOfSpaceReason) {
		t.Fatalf("read-only=%v why=%q", ro, why)
	}
	info, err := tb.cl.Do(ctxT(t), &bkproto.Request{Op: bkproto.OpInfo})
	if err != nil || info.InfoFlags&bkproto.InfoOutOfSpace == 0 || info.InfoFlags&bkproto.InfoReadOnly == 0 {
		t.Fatalf("info flags %b (%v): want read-only and out of space", info.InfoFlags, err)
	}
	err = tb.add(1, 0, -1, "x", 0)
	if !errors.Is(err, client.ErrReadOnly) {
		t.Fatalf("add to a full bookie: %v, want %v", err, client.ErrReadOnly)
	}
}

// handleRead reads one entry through Core.Handle.
func handleRead(c *Core, ledgerID, entryID int64) (*bkproto.Response, error) {
	done := make(chan *bkproto.Response, 1)
	c.Handle(&bkproto.Request{Op: bkproto.OpRead, LedgerID: ledgerID, EntryID: entryID},
		func(r *bkproto.Response) { done <- r })
	select {
	case r := <-done:
		return r, client.StatusError(r.Status)
	case <-time.After(10 * time.Second):
		return nil, errors.New("read not answered")
	}
}

// fillFile writes n bytes to name.
func fillFile(t *testing.T, fs engine.FS, name string, n int) string {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([][]byte{make([]byte, n)}, 0); err != nil {
		t.Fatal(fmt.Errorf("fill %s: %w", name, err))
	}
	return name
}
