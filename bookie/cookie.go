package bookie

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/metadata"
)

// A cookie ties a bookie's identity to its directories. One copy lives in
// every journal and ledger directory (file CookieFile) and one in metadata
// (CookiePath). At start every copy must agree: a directory without its
// cookie means the disk was wiped or swapped, and a bookie that came back
// empty under a known identity would answer "no such entry" for data the
// cluster believes it holds (BookKeeper #2612). Such a bookie refuses to
// start until an operator formats it (magnetar bookie format), which gives
// it a new instance id: the cluster then treats it as a new, empty bookie.
//
// Cookie file (JSON, written atomically):
//
//	{"version":1,"bookieId":"host:3181","instanceId":"<32 hex>",
//	 "journalDirs":[...],"ledgerDirs":[...]}
type Cookie struct {
	Version     int      `json:"version"`
	BookieID    string   `json:"bookieId"`
	InstanceID  string   `json:"instanceId"`
	JournalDirs []string `json:"journalDirs"`
	LedgerDirs  []string `json:"ledgerDirs"`
}

// CookieFile is the cookie's name in each data directory.
const CookieFile = "COOKIE"

const cookieVersion = 1

// ErrCookie is wrapped by every cookie check failure.
var ErrCookie = errors.New("bookie: cookie check failed")

// CookiePath is where a bookie's cookie lives in metadata.
func CookiePath(bookieID string) string { return "/bookies/cookies/" + bookieID }

func (c Cookie) dirs() []string { return append(slices.Clone(c.JournalDirs), c.LedgerDirs...) }

func (c Cookie) encode() []byte {
	b, _ := json.Marshal(c) // plain fields: cannot fail
	return b
}

func decodeCookie(b []byte, where string) (Cookie, error) {
	var c Cookie
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%w: cookie %s: %w: %v", ErrCookie, where, engine.ErrCorruption, err)
	}
	if c.Version != cookieVersion {
		return c, fmt.Errorf("%w: cookie %s has version %d, this build reads %d", ErrCookie, where, c.Version, cookieVersion)
	}
	return c, nil
}

// sameIdentity compares what must match; the directory lists must match
// as sets in order (a ledger's directory is chosen by its position).
func sameIdentity(a, b Cookie) string {
	switch {
	case a.BookieID != b.BookieID:
		return fmt.Sprintf("bookie id %q vs %q", a.BookieID, b.BookieID)
	case a.InstanceID != b.InstanceID:
		return fmt.Sprintf("instance id %s vs %s (one of them was formatted)", a.InstanceID, b.InstanceID)
	case !slices.Equal(a.JournalDirs, b.JournalDirs):
		return fmt.Sprintf("journal directories %v vs %v", a.JournalDirs, b.JournalDirs)
	case !slices.Equal(a.LedgerDirs, b.LedgerDirs):
		return fmt.Sprintf("ledger directories %v vs %v", a.LedgerDirs, b.LedgerDirs)
	}
	return ""
}

// CheckCookies verifies the cookies of a starting bookie, or writes them
// for a brand-new one (no cookie anywhere and every directory empty).
func CheckCookies(ctx context.Context, fs engine.FS, store metadata.Store, want Cookie) error {
	want.Version = cookieVersion
	stored, _, err := store.Get(ctx, CookiePath(want.BookieID))
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return firstStart(ctx, fs, store, want)
	case err != nil:
		return fmt.Errorf("bookie: read cookie of %s from metadata: %w", want.BookieID, err)
	}
	reg, err := decodeCookie(stored, "in metadata "+CookiePath(want.BookieID))
	if err != nil {
		return err
	}
	want.InstanceID = reg.InstanceID
	if diff := sameIdentity(reg, want); diff != "" {
		return fmt.Errorf("%w: this bookie's configuration does not match its registered cookie: %s; "+
			"restore the configuration, or run `magnetar bookie format` if the change is intended (the bookie then starts empty)", ErrCookie, diff)
	}
	for _, d := range want.dirs() {
		b, err := engine.ReadFile(fs, path.Join(d, CookieFile))
		if engine.IsNotExist(err) {
			return fmt.Errorf("%w: directory %s has no cookie, but bookie %s is registered (instance %s): the directory was wiped, "+
				"replaced or is the wrong one; starting would lose data the cluster expects here. Fix the mount, or run "+
				"`magnetar bookie format` to rejoin as an empty bookie", ErrCookie, d, want.BookieID, reg.InstanceID)
		}
		if err != nil {
			return fmt.Errorf("bookie: read cookie in %s: %w", d, err)
		}
		c, err := decodeCookie(b, "in "+d)
		if err != nil {
			return err
		}
		if diff := sameIdentity(c, reg); diff != "" {
			return fmt.Errorf("%w: cookie in %s does not match the registered one: %s", ErrCookie, d, diff)
		}
	}
	return nil
}

// firstStart handles a bookie unknown to metadata: it must have no data.
func firstStart(ctx context.Context, fs engine.FS, store metadata.Store, want Cookie) error {
	for _, d := range want.dirs() {
		names, err := fs.List(d)
		if engine.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bookie: list %s: %w", d, err)
		}
		if len(names) > 0 {
			return fmt.Errorf("%w: bookie %s is not registered in metadata but directory %s holds data (%d entries): "+
				"it belongs to another bookie or cluster, or metadata was lost; run `magnetar bookie format` to wipe it "+
				"and start as a new bookie", ErrCookie, want.BookieID, d, len(names))
		}
	}
	return writeCookies(ctx, fs, store, want)
}

// writeCookies gives the bookie a new instance id and writes its cookie to
// every directory, then to metadata (last: a crash in between leaves a
// bookie that firstStart rejects loudly rather than one that half-starts).
func writeCookies(ctx context.Context, fs engine.FS, store metadata.Store, c Cookie) error {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("bookie: instance id: %w", err)
	}
	c.Version, c.InstanceID = cookieVersion, hex.EncodeToString(id[:])
	for _, d := range c.dirs() {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("bookie: create %s: %w", d, err)
		}
		if err := engine.WriteFileAtomic(fs, path.Join(d, CookieFile), c.encode()); err != nil {
			return fmt.Errorf("bookie: write cookie in %s: %w", d, err)
		}
	}
	if _, _, err := store.Create(ctx, CookiePath(c.BookieID), c.encode(), metadata.CreateOptions{}); err != nil {
		return fmt.Errorf("bookie: register cookie of %s in metadata: %w", c.BookieID, err)
	}
	return nil
}

// Format wipes a bookie's directories and gives it a new identity (the
// cluster then sees a new, empty bookie; re-replication restores its
// ledgers elsewhere). Without force it refuses to wipe directories that
// hold data.
func Format(ctx context.Context, fs engine.FS, store metadata.Store, c Cookie, force bool) error {
	for _, d := range c.dirs() {
		names, err := fs.List(d)
		if engine.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bookie format: list %s: %w", d, err)
		}
		if len(names) > 0 && !force {
			return fmt.Errorf("bookie format: %s is not empty (%d entries); pass --force to wipe it", d, len(names))
		}
		if err := removeContents(fs, d); err != nil {
			return fmt.Errorf("bookie format: wipe %s: %w", d, err)
		}
	}
	err := store.Delete(ctx, CookiePath(c.BookieID), -1)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return fmt.Errorf("bookie format: remove old cookie from metadata: %w", err)
	}
	return writeCookies(ctx, fs, store, c)
}

// removeContents removes everything under dir, keeping dir.
func removeContents(fs engine.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		fi, err := fs.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if err := removeContents(fs, p); err != nil {
				return err
			}
		}
		if err := fs.Remove(p); err != nil {
			return err
		}
	}
	return fs.SyncDir(dir)
}
