package bookie

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/internal/testdisk"
	"github.com/magnetar-io/magnetar/journal"
)

// TestFullTmpfsDisks runs a bookie with its journal and its ledgers on two
// small tmpfs file systems (std engine, statfs): the ledger disk fills,
// then the journal disk, then both; each time the bookie turns read-only
// for lack of space, serves every acknowledged entry, turns writable by
// itself after space is freed, and at the end restarts on the nearly full
// disks with nothing lost.
func TestFullTmpfsDisks(t *testing.T) {
	jdir, ldir := testdisk.MountTmpfs(t, "48m"), testdisk.MountTmpfs(t, "48m")
	check := 50 * time.Millisecond
	var core *Core
	open := func() {
		t.Helper()
		st := func(cp entrylog.Checkpointer) (entrylog.Storage, error) {
			return entrylog.Open(engine.NewStd(), []string{ldir}, entrylog.Options{Checkpointer: cp,
				LogSizeLimit: 4 << 20, WriteCacheMaxSize: 4 << 20, FlushInterval: 50 * time.Millisecond, GCWaitTime: -1,
				Logger: quietLogger()})
		}
		c, err := OpenCore(engine.NewStd(), []string{jdir}, journal.Options{MaxFileSize: 8 << 20, Logger: quietLogger()}, st,
			Options{LedgerDirs: []string{ldir}, DiskCheckInterval: check, FlushInterval: 100 * time.Millisecond,
				Logger: quietLogger()})
		if err != nil {
			t.Fatalf("open bookie on tmpfs: %v", err)
		}
		core = c
	}
	open()
	defer func() { core.Close() }()
	d := &smallDisk{t: t, check: check}
	next := int64(0)
	for _, tc := range []struct {
		name string
		dirs []string
	}{{"ledger disk", []string{ldir}}, {"journal disk", []string{jdir}}, {"both", []string{jdir, ldir}}} {
		d.core = core
		var fillers []string
		for _, dir := range tc.dirs {
			fillers = append(fillers, testdisk.Fill(t, dir, 1<<20))
		}
		start := time.Now()
		next = d.fillUntilRefused(1, next)
		toReadOnly := time.Since(start)
		d.mustBeOutOfSpace()
		_, why := core.ReadOnly()
		d.readAll(1, next)
		for _, f := range fillers {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		took := d.waitWritable(100 * check)
		t.Logf("%s: read-only after %v of adds (%s); writable %v after space was freed (diskCheckInterval %v)",
			tc.name, toReadOnly.Round(time.Millisecond), why, took.Round(time.Millisecond), check)
		if !strings.Contains(why, OutOfSpaceReason) {
			t.Fatalf("reason %q", why)
		}
	}
	// Restart on nearly full disks.
	testdisk.Fill(t, ldir, 2<<20)
	testdisk.Fill(t, jdir, 2<<20)
	if err := core.Close(); err != nil && !isNoSpace(err) {
		t.Fatalf("close: %v", err)
	}
	start := time.Now()
	open()
	t.Logf("restart on nearly full disks took %v", time.Since(start).Round(time.Millisecond))
	d.core = core
	d.readAll(1, next)
}
