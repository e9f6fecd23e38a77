package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// backendOf names an FS's backend (osFS has Backend; others are not ours
// to open here).
func backendOf(t *testing.T, fs engine.FS) string {
	t.Helper()
	b, ok := fs.(interface{ Backend() string })
	if !ok {
		t.Fatalf("%T has no Backend", fs)
	}
	return b.Backend()
}

// TestJournalIOBackend: the journals get their own backend,
// journalIOBackend, std unless configured (TUNING.md, "The journal's
// system calls"); the entry logs keep ioBackend's. A value that is no
// backend fails the start with the key named.
func TestJournalIOBackend(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if got := defaultJournalSettings().ioBackend; got != engine.BackendStd {
		t.Fatalf("journalIOBackend defaults to %q, want std", got)
	}
	f := parseBookieConf(t, "journalIOBackend=uring\n")
	if f.journal.ioBackend != engine.BackendUring {
		t.Fatalf("journalIOBackend=uring read as %q", f.journal.ioBackend)
	}

	bfs, err := openBookieFS(engine.BackendStd, engine.BackendStd, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if bfs.journal == bfs.storage || backendOf(t, bfs.journal) != engine.BackendStd || backendOf(t, bfs.storage) != engine.BackendStd {
		t.Fatalf("std and std: journal %v, storage %v", bfs.journal, bfs.storage)
	}
	if err := bfs.close(); err != nil {
		t.Fatal(err)
	}

	if probe, err := engine.NewUring(engine.UringOptions{}); err == nil {
		probe.Close()
		bfs, err := openBookieFS(engine.BackendUring, engine.BackendStd, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if backendOf(t, bfs.journal) != engine.BackendStd || backendOf(t, bfs.storage) != engine.BackendUring {
			t.Fatalf("uring storage, std journals: journal %s, storage %s", backendOf(t, bfs.journal), backendOf(t, bfs.storage))
		}
		if err := bfs.close(); err != nil {
			t.Fatal(err)
		}
		bfs, err = openBookieFS(engine.BackendUring, engine.BackendUring, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if bfs.journal == bfs.storage || backendOf(t, bfs.journal) != engine.BackendUring {
			t.Fatalf("uring journals share storage's ring or are not uring: %s", backendOf(t, bfs.journal))
		}
		if err := bfs.close(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("io_uring unavailable here (%v): the uring cases are not checked", err)
	}

	_, err = openBookieFS(engine.BackendStd, "fast", quiet)
	if err == nil || !strings.Contains(err.Error(), "journalIOBackend") || !strings.Contains(err.Error(), `"fast"`) {
		t.Fatalf("journalIOBackend=fast: %v, want an error naming the key and the value", err)
	}
}

// TestJournalZeroFillSettings: the spare journal files are on by default,
// and journalZeroFill and journalZeroFillRateMB reach the journal's options.
func TestJournalZeroFillSettings(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o := defaultJournalSettings().options(quiet); !o.ZeroFill || o.WithDefaults().ZeroFillRate != 32<<20 {
		t.Fatalf("defaults: ZeroFill %v at %d B/s, want on at 32 MiB/s", o.ZeroFill, o.WithDefaults().ZeroFillRate)
	}
	f := parseBookieConf(t, "journalZeroFill=false\njournalZeroFillRateMB=64\n")
	if o := f.journal.options(quiet); o.ZeroFill || o.ZeroFillRate != 64<<20 {
		t.Fatalf("journalZeroFill=false, journalZeroFillRateMB=64 read as ZeroFill %v at %d B/s", o.ZeroFill, o.ZeroFillRate)
	}
}

// parseBookieConf parses a bookie's flags from a config file of conf's
// lines (and a metadata store, which every bookie needs).
func parseBookieConf(t *testing.T, conf string) bookieFlags {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bk.conf")
	writeFile(t, path, "metadataServiceUri=zk:zk1:2181\n"+conf)
	f, err := parseBookieFlags("magnetar bookie", []string{"--config", path}, io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
