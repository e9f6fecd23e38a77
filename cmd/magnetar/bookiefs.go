package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/magnetar-io/magnetar/engine"
)

// bookieFS is one bookie's I/O: its ledger storage (entry logs, cookies)
// on storage, its journals on journal, a separate io_uring ring
// (engine.Separate). On a shared ring a journal sync's completion could be
// reaped by an entry-log flush's goroutine, and waited while that one
// waited for a CPU: with the journal and entry logs on tmpfs at 60,000
// msg/s the journal queue's p99 halved with rings of their own (TUNING.md).
type bookieFS struct{ storage, journal engine.FS }

func openBookieFS(backend string, log *slog.Logger) (bookieFS, error) {
	storage, err := engine.New(engine.Options{Backend: backend, Logger: log})
	if err != nil {
		return bookieFS{}, err
	}
	journal, err := engine.Separate(storage)
	if err != nil {
		storage.Close()
		return bookieFS{}, fmt.Errorf("io backend for the journals: %w", err)
	}
	return bookieFS{storage: storage, journal: journal}, nil
}

// close closes the backends; every file on them must be closed first.
func (b bookieFS) close() error {
	var errs []error
	if b.journal != b.storage { // its own ring (engine.Separate)
		errs = append(errs, b.journal.Close())
	}
	return errors.Join(append(errs, b.storage.Close())...)
}
