package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/journal"
)

// The journal's footprint counts the live files and the recycled pool at
// their size limit; the bookie warns when that is over half the journal's
// disk, also for a directory not made yet.
func TestJournalFootprintWarning(t *testing.T) {
	if got, want := journalFootprint(journal.Options{}), int64(4)<<31; got != want {
		t.Fatalf("default footprint %d, want %d (2 live + 2 recycled files of 2 GiB)", got, want)
	}
	if got := journalFootprint(journal.Options{MaxFileSize: 64 << 20, MaxRecycledFiles: 1}); got != 3*64<<20 {
		t.Fatalf("footprint %d", got)
	}
	dir := filepath.Join(t.TempDir(), "not", "made", "journal")
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	warnJournalFootprint(journal.Options{MaxFileSize: 1 << 20}, []string{dir}, log)
	if out.Len() != 0 {
		t.Fatalf("warned for 1 MiB journal files: %s", out.String())
	}
	warnJournalFootprint(journal.Options{MaxFileSize: 1 << 50}, []string{dir}, log)
	if !strings.Contains(out.String(), "lower journalMaxSizeMB") || !strings.Contains(out.String(), dir) {
		t.Fatalf("no warning for journal files larger than the disk: %q", out.String())
	}
}
