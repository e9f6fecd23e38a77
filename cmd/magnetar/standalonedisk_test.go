package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
)

// fakeDisk reports a disk that is full (99% used) or nearly empty.
type fakeDisk struct{ full atomic.Bool }

func (d *fakeDisk) usage(string) (free, total uint64, err error) {
	if d.full.Load() {
		return 1 << 20, 100 << 20, nil
	}
	return 90 << 20, 100 << 20, nil
}

// startFakeDiskStorage starts standalone's storage on a disk the test
// fills and frees, checked every 10 ms.
func startFakeDiskStorage(t *testing.T) (*standaloneStorage, metadata.Store, *fakeDisk) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := metadata.Open(context.Background(), "local:"+t.TempDir(), metadata.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	disk := &fakeDisk{}
	f := standaloneFlags{brokerSettings: defaultBrokerSettings(), journal: defaultJournalSettings()}
	f.storage.logSizeLimit = 16 << 20 // keep the test's disk use small
	f.disk = diskSettings{checkInterval: 10 * time.Millisecond, usage: disk.usage}
	st, err := startStandaloneStorage(context.Background(), store, t.TempDir(), f, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close(log) })
	return st, store, disk
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// registeredReadOnly waits until the standalone bookie's registration says
// readOnly == want.
func registeredReadOnly(t *testing.T, store metadata.Store, want bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		regs, err := registry.Bookies(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		if len(regs) == 1 && regs[0].ReadOnly == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("registration %+v: want read-only %v", regs, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Issue 30, defect 2: standalone's bookie never published its read-only
// mode, so placement kept choosing it and every ledger created on a full
// disk failed at its first add.
func TestStandaloneAnnouncesReadOnly(t *testing.T) {
	st, store, disk := startFakeDiskStorage(t)
	registeredReadOnly(t, store, false)
	disk.full.Store(true)
	registeredReadOnly(t, store, true)
	ctx := context.Background()
	// The ledger client learns of the change through its watch of the
	// registrations, a moment after the registration itself.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w, err := st.ledgers.Create(ctx, ledger.CreateOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1})
		if errors.Is(err, ledger.ErrNotEnoughBookies) && strings.Contains(err.Error(), "out of disk space") {
			break
		}
		if w != nil {
			_ = w.Close(ctx)
		}
		if time.Now().After(deadline) {
			t.Fatalf("create on a full bookie: %v, want ErrNotEnoughBookies naming the full disk", err)
		}
	}
	if regs, _ := registry.Bookies(ctx, store); !regs[0].OutOfSpace || !strings.HasPrefix(regs[0].ReadOnlyReason, bookie.OutOfSpaceReason) {
		t.Fatalf("registration %+v does not say the disk is full", regs[0])
	}
	disk.full.Store(false)
	registeredReadOnly(t, store, false)
	deadline := time.Now().Add(3 * time.Second)
	for {
		w, err := st.ledgers.Create(ctx, ledger.CreateOptions{EnsembleSize: 1, WriteQuorumSize: 1, AckQuorumSize: 1})
		if err == nil {
			if _, err := w.Append(ctx, []byte("after space was freed")); err != nil {
				t.Fatalf("append once writable again: %v", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("create once writable again: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Issue 30, defect 3: standalone read BookKeeper's directory and disk keys
// as "config keys not used by this build", so the journal and the ledgers
// could not sit on different disks and no threshold could be set.
func TestStandaloneDiskAndDirectoryKeys(t *testing.T) {
	journal, ledgers, meta := t.TempDir(), t.TempDir(), t.TempDir()
	p := writeConf(t, "journalDirectory="+journal+"\nledgerDirectories=/ignored/by/flag\n"+
		"diskUsageThreshold=0.8\ndiskUsageWarnThreshold=0.7\ndiskUsageLwmThreshold=0.6\ndiskCheckInterval=250\n"+
		"metadataStoreUrl=local:"+meta+"\n")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f, err := parseStandaloneFlags([]string{"--config", p, "--ledger-dirs", ledgers}, io.Discard, log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "not used") {
		t.Fatalf("keys reported as unused: %s", logs.String())
	}
	want := diskSettings{threshold: 0.8, warn: 0.7, lwm: 0.6, checkInterval: 250 * time.Millisecond}
	f.disk.usage = nil
	if !reflect.DeepEqual(f.disk, want) || f.journalDirs != journal || f.ledgerDirs != ledgers || f.metadataStoreURL("x") != "local:"+meta {
		t.Fatalf("keys applied wrongly (flags win): disk %+v journal %q ledgers %q metadata %q", f.disk, f.journalDirs, f.ledgerDirs, f.metadataURL)
	}
	for text, want := range map[string]string{
		"diskUsageThreshold=1.5\n":                              "between 0 and 1",
		"diskUsageThreshold=0.8\ndiskUsageLwmThreshold=0.9\n":   "above diskUsageThreshold",
		"diskUsageThreshold=0.8\ndiskUsageWarnThreshold=0.85\n": "above diskUsageThreshold",
	} {
		if _, err := parseStandaloneFlags([]string{"--config", writeConf(t, text)}, io.Discard, log); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", text, err, want)
		}
	}
}

// The journal and the entry logs go where journalDirectories and
// ledgerDirectories say.
func TestStandaloneSeparateJournalAndLedgerDirs(t *testing.T) {
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := metadata.Open(context.Background(), "local:"+t.TempDir(), metadata.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	journal, ledgers := t.TempDir(), t.TempDir()
	f := standaloneFlags{brokerSettings: defaultBrokerSettings(), journal: defaultJournalSettings(), journalDirs: journal, ledgerDirs: ledgers}
	f.storage.logSizeLimit = 16 << 20
	st, err := startStandaloneStorage(context.Background(), store, t.TempDir(), f, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	st.close(log)
	for _, d := range []string{journal, ledgers} {
		if ents, _ := os.ReadDir(d); len(ents) == 0 {
			t.Errorf("%s is empty: the bookie did not use it", d)
		}
	}
}
