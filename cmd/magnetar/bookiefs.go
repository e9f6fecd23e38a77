package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/magnetar-io/magnetar/engine"
)

// bookieFS is one bookie's I/O: its ledger storage (entry logs, cookies)
// on storage (ioBackend), its journals on journal (journalIOBackend).
//
// The journals default to std: each journal's goroutine writes and
// datasyncs with plain system calls. Through io_uring, a direct write into
// the journal's preallocated file and every datasync ran on a kernel
// worker thread that then woke the journal, thread switches this VM
// charges dearly (TUNING.md, "The journal's system calls"). On uring they
// get a ring of their own (engine.Separate): on a shared ring a journal
// sync's completion could be reaped by an entry-log flush's goroutine, and
// waited while that one waited for a CPU.
type bookieFS struct{ storage, journal engine.FS }

// openBookieFS opens the entry logs' backend and the journals': auto,
// uring or std each.
func openBookieFS(backend, journalBackend string, log *slog.Logger) (bookieFS, error) {
	storage, err := engine.New(engine.Options{Backend: backend, Logger: log})
	if err != nil {
		return bookieFS{}, err
	}
	journal, err := openJournalFS(storage, journalBackend, log)
	if err != nil {
		storage.Close()
		return bookieFS{}, fmt.Errorf("io backend for the journals (journalIOBackend): %w", err)
	}
	return bookieFS{storage: storage, journal: journal}, nil
}

// openJournalFS is the journals' backend, never storage itself when it is
// an io_uring: a ring of its own then.
func openJournalFS(storage engine.FS, backend string, log *slog.Logger) (engine.FS, error) {
	switch backend {
	case engine.BackendStd:
		log.Info("journal io backend selected", "backend", engine.BackendStd, "reason", "configured (journalIOBackend)")
		return engine.NewStd(), nil
	case engine.BackendUring, engine.BackendAuto, "":
		if own, err := engine.Separate(storage); err != nil || own != storage {
			return own, err // storage's ring's options, a ring apart
		}
		return engine.New(engine.Options{Backend: backend, Logger: log})
	}
	return nil, fmt.Errorf("unknown io backend %q: want auto, uring or std", backend)
}

// close closes the backends; every file on them must be closed first.
func (b bookieFS) close() error {
	var errs []error
	if b.journal != b.storage { // its own ring (engine.Separate)
		errs = append(errs, b.journal.Close())
	}
	return errors.Join(append(errs, b.storage.Close())...)
}
