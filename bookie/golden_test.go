package bookie

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path"
	"reflect"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/metadata"
)

// Golden-format test of the bookie's own persistent file, the cookie
// (one copy in every journal and ledger directory, one in metadata; the
// journal and entry logs have their own golden tests in their packages).
// testdata/golden-v1/COOKIE is a version-1 cookie as written by this
// version; the test checks that decoding gives exactly the values written,
// that encoding them gives exactly the committed bytes, and that a bookie
// whose directories and metadata hold it passes CheckCookies. A change to
// the format fails here; if intended, it needs a new cookie version and a
// reader for version 1, and only then `go test ./bookie -run TestGolden
// -update` rewrites the file.

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

const goldenCookieFile = "testdata/golden-v1/" + CookieFile

func goldenCookie() Cookie {
	return Cookie{Version: 1, BookieID: "bookie-1.example.com:3181", InstanceID: "0123456789abcdef0123456789abcdef",
		JournalDirs: []string{"/data/journal"}, LedgerDirs: []string{"/data/ledgers0", "/data/ledgers1"}}
}

// TestGoldenCookie: the committed cookie decodes to exactly the values
// written, re-encodes to the same bytes, and is accepted at start.
func TestGoldenCookie(t *testing.T) {
	want := goldenCookie()
	enc := want.encode()
	if *updateGolden {
		if err := os.MkdirAll(path.Dir(goldenCookieFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenCookieFile, enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(goldenCookieFile)
	if err != nil {
		t.Fatalf("%v (run `go test ./bookie -run TestGolden -update` once to create it)", err)
	}
	if !bytes.Equal(got, enc) {
		t.Errorf("encoding the golden cookie gives\n%s\ncommitted\n%s", enc, got)
	}
	// The layout in cookie.go, by hand.
	const layout = `{"version":1,"bookieId":"bookie-1.example.com:3181","instanceId":"0123456789abcdef0123456789abcdef",` +
		`"journalDirs":["/data/journal"],"ledgerDirs":["/data/ledgers0","/data/ledgers1"]}`
	if string(got) != layout {
		t.Errorf("committed cookie\n%s\nthe format says\n%s", got, layout)
	}
	c, err := decodeCookie(got, goldenCookieFile)
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("decodes to %+v, %v; want %+v", c, err, want)
	}

	// A bookie whose directories and metadata hold the golden cookie starts.
	ctx := context.Background()
	fs := engine.NewMem()
	store := metadata.NewMemoryServer().NewSession()
	defer store.Close()
	if _, _, err := store.Create(ctx, CookiePath(want.BookieID), got, metadata.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range want.dirs() {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := engine.WriteFileAtomic(fs, path.Join(d, CookieFile), got); err != nil {
			t.Fatal(err)
		}
	}
	cfg := want
	cfg.Version, cfg.InstanceID = 0, "" // what a starting bookie knows: its id and directories
	if err := CheckCookies(ctx, fs, store, cfg); err != nil {
		t.Fatalf("a bookie with the golden cookie does not start: %v", err)
	}
}
