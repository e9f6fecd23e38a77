package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/bookie/registry"
	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/entrylog"
	"github.com/magnetar-io/magnetar/ledger"
	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

const bookieShellUsage = `usage: magnetar bookie shell <command> [flags] [args]

commands (ledgers and read-entry open the ledger directories directly: stop the bookie first):
  ledgers      --ledger-dirs D1,D2          list the ledgers stored here: id, last entry, fenced
  read-entry   --ledger-dirs ... LEDGER ENTRY   print one entry's head and bytes (hex)
  list-bookies --metadata-store zk:...      list registered bookies and their mode
  underreplicated --metadata-store zk:... [--bookie ID]
               ledgers marked under-replicated (waiting for auto-recovery) and, with
               --bookie, ledgers whose ensembles still name that bookie; prints
               nothing once none is left (a decommissioned bookie's data is safe)
`

func runBookieShell(args []string, stdout, stderr io.Writer, log *slog.Logger) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, bookieShellUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "ledgers", "read-entry":
		err = shellStorage(args[0], args[1:], stdout, stderr, log)
	case "list-bookies":
		err = shellListBookies(args[1:], stdout, stderr, log)
	case "underreplicated":
		err = shellUnderreplicated(args[1:], stdout, stderr, log)
	default:
		fmt.Fprintf(stderr, "magnetar bookie shell: unknown command %q\n\n%s", args[0], bookieShellUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "magnetar bookie shell %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func shellStorage(cmd string, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fl := flag.NewFlagSet("magnetar bookie shell "+cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	dirs := fl.String("ledger-dirs", "data/bookie/ledgers", "ledgerDirectories of the (stopped) bookie")
	asJSON := fl.Bool("json", false, "JSON output")
	if err := fl.Parse(args); err != nil {
		return err
	}
	ld, err := splitDirs(*dirs)
	if err != nil {
		return err
	}
	st, err := openLedgerStorage(engine.NewStd(), ld, defaultStorageSettings(), nil, log, nil)
	if err != nil {
		return fmt.Errorf("open ledger storage (is the bookie still running?): %w", err)
	}
	defer st.Close()
	if cmd == "ledgers" {
		return shellLedgers(st, stdout, *asJSON)
	}
	if fl.NArg() != 2 {
		return errors.New("want LEDGER ENTRY")
	}
	ledgerID, err1 := strconv.ParseInt(fl.Arg(0), 10, 64)
	entryID, err2 := strconv.ParseInt(fl.Arg(1), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("LEDGER and ENTRY must be integers: %w", err)
	}
	data, err := st.ReadEntry(ledgerID, entryID)
	if err != nil {
		return err
	}
	head, herr := bkproto.ParseEntryHead(data)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"ledger": ledgerID, "entry": entryID, "bytes": len(data),
			"lac": head.LAC, "data": data})
	}
	fmt.Fprintf(stdout, "ledger %d entry %d: %d bytes", ledgerID, entryID, len(data))
	if herr == nil {
		fmt.Fprintf(stdout, ", head: ledger %d entry %d lac %d", head.LedgerID, head.EntryID, head.LAC)
	}
	fmt.Fprintf(stdout, "\n%s", hex.Dump(data))
	return nil
}

type shellLedger struct {
	Ledger    int64 `json:"ledger"`
	LastEntry int64 `json:"lastEntry"`
	Fenced    bool  `json:"fenced"`
}

func shellLedgers(st entrylog.Storage, stdout io.Writer, asJSON bool) error {
	var out []shellLedger
	var ferr error
	err := st.Ledgers(func(id int64) bool {
		l := shellLedger{Ledger: id, LastEntry: -1}
		if last, err := st.LastEntryID(id); err == nil {
			l.LastEntry = last
		} else if !errors.Is(err, entrylog.ErrNoEntry) {
			ferr = err
			return false
		}
		l.Fenced, ferr = st.IsFenced(id)
		out = append(out, l)
		return ferr == nil
	})
	if err = errors.Join(err, ferr); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "%-20s %-12s %s\n", "LEDGER", "LAST ENTRY", "FENCED")
	for _, l := range out {
		fmt.Fprintf(stdout, "%-20d %-12d %v\n", l.Ledger, l.LastEntry, l.Fenced)
	}
	return nil
}

func shellListBookies(args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fl := flag.NewFlagSet("magnetar bookie shell list-bookies", flag.ContinueOnError)
	fl.SetOutput(stderr)
	url := fl.String("metadata-store", "", "the bookies' metadataServiceUri: zk:host:2181/chroot or etcd:http://host:2379/prefix (required)")
	asJSON := fl.Bool("json", false, "JSON output")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return errors.New("--metadata-store is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, bookieMetadataURL(*url), metadata.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	list, err := registry.Bookies(ctx, store)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(list)
	}
	fmt.Fprintf(stdout, "%-28s %-24s %-10s %-10s %s\n", "BOOKIE", "ADDRESS", "MODE", "RACK", "REGION")
	for _, b := range list {
		mode := "writable"
		if b.ReadOnly {
			mode = "read-only"
		}
		addr := b.Address
		if b.TLSAddress != "" {
			addr = strings.TrimPrefix(addr+" tls:"+b.TLSAddress, " ")
		}
		fmt.Fprintf(stdout, "%-28s %-24s %-10s %-10s %s\n", b.BookieID, addr, mode, b.Rack, b.Region)
	}
	return nil
}

// shellUnderreplicated prints one line per ledger that still needs
// auto-recovery: marked under-replicated, or (with --bookie) holding a
// fragment on that bookie. Empty output means the bookie can go.
func shellUnderreplicated(args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fl := flag.NewFlagSet("magnetar bookie shell underreplicated", flag.ContinueOnError)
	fl.SetOutput(stderr)
	url := fl.String("metadata-store", "", "the bookies' metadataServiceUri (required)")
	bookieID := fl.String("bookie", "", "also list ledgers whose ensembles name this bookie id (host:port)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return errors.New("--metadata-store is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := metadata.Open(ctx, bookieMetadataURL(*url), metadata.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	marked, err := ledger.ListUnderreplicated(ctx, store)
	if err != nil {
		return err
	}
	for _, id := range marked {
		fmt.Fprintf(stdout, "%d under-replicated\n", id)
	}
	if *bookieID == "" {
		return nil
	}
	return ledger.ForEachLedger(ctx, store, func(id int64) error {
		md, err := ledger.ReadMetadata(ctx, store, id)
		if errors.Is(err, ledger.ErrNoSuchLedger) {
			return nil // deleted during the walk
		}
		if err != nil {
			return err
		}
		for _, f := range md.Ensembles {
			if slices.Contains(f.Bookies, *bookieID) {
				fmt.Fprintf(stdout, "%d on %s from entry %d\n", id, *bookieID, f.FirstEntry)
				return nil
			}
		}
		return nil
	})
}
