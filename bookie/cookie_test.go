package bookie

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/metadata"
)

func testCookie() Cookie {
	return Cookie{BookieID: "127.0.0.1:3181", JournalDirs: []string{"/j"}, LedgerDirs: []string{"/l1", "/l2"}}
}

func TestCookieLifecycle(t *testing.T) {
	ctx := context.Background()
	fs := engine.NewMem()
	store := metadata.NewMemoryServer().NewSession()
	defer store.Close()
	c := testCookie()
	if err := CheckCookies(ctx, fs, store, c); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := CheckCookies(ctx, fs, store, c); err != nil {
		t.Fatalf("second start: %v", err)
	}
	// A wiped ledger directory: the bookie refuses to start (BookKeeper #2612).
	if err := removeContents(fs, "/l2"); err != nil {
		t.Fatal(err)
	}
	err := CheckCookies(ctx, fs, store, c)
	if !errors.Is(err, ErrCookie) || !strings.Contains(err.Error(), "/l2 has no cookie") {
		t.Fatalf("wiped directory: %v", err)
	}
	// A changed directory list is refused too.
	moved := c
	moved.LedgerDirs = []string{"/l1"}
	if err := CheckCookies(ctx, fs, store, moved); !errors.Is(err, ErrCookie) {
		t.Fatalf("changed directories: %v", err)
	}
	// Format gives a new identity; then it starts.
	if err := Format(ctx, fs, store, c, false); err == nil {
		t.Fatal("format without --force wiped a directory holding data")
	}
	if err := Format(ctx, fs, store, c, true); err != nil {
		t.Fatalf("format: %v", err)
	}
	if err := CheckCookies(ctx, fs, store, c); err != nil {
		t.Fatalf("start after format: %v", err)
	}
}

func TestCookieDataWithoutRegistration(t *testing.T) {
	ctx := context.Background()
	fs := engine.NewMem()
	store := metadata.NewMemoryServer().NewSession()
	defer store.Close()
	if err := fs.MkdirAll("/l1", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := engine.WriteFileAtomic(fs, "/l1/000001.log", []byte("old data")); err != nil {
		t.Fatal(err)
	}
	if err := CheckCookies(ctx, fs, store, testCookie()); !errors.Is(err, ErrCookie) {
		t.Fatalf("unregistered bookie with data: %v", err)
	}
}
