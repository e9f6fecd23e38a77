package main

// Test-only disk faults for the fault suite (tools/chaos): when the
// environment variable MAGNETAR_TEST_FAULT_CONTROL names a file, the
// bookie's file system is wrapped in engine/errorfs and the file's first
// word, read every 100 ms, says what fails until it changes:
//
//	journal-sync   every fsync under the journal directories fails with EIO
//	journal-write  every write under the journal directories fails with EIO
//	(missing, empty or anything else: nothing fails)
//
// Without the variable nothing is wrapped. It is not a flag or a
// configuration key on purpose: no deployment should have it.

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/magnetar-io/magnetar/engine"
	"github.com/magnetar-io/magnetar/engine/errorfs"
	"golang.org/x/sys/unix"
)

const faultControlEnv = "MAGNETAR_TEST_FAULT_CONTROL"

// traceReadersEnv set to 1 makes a broker log what every reader asks for
// and is sent (broker.Config.TraceReaders): the fault suite's aid for
// telling a reader's disagreement apart as the broker's or the client's.
const traceReadersEnv = "MAGNETAR_TEST_TRACE_READERS"

// withTestFaults wraps fs when the fault control file is configured.
func withTestFaults(ctx context.Context, fs engine.FS, journalDirs []string, log *slog.Logger) engine.FS {
	control := os.Getenv(faultControlEnv)
	if control == "" {
		return fs
	}
	var mode atomic.Pointer[string]
	mode.Store(new(string))
	inj := errorfs.InjectorFunc(func(op errorfs.Op, path string, _ int64) (errorfs.Fault, bool) {
		var want errorfs.Op
		switch *mode.Load() {
		case "journal-sync":
			want = errorfs.OpSync
		case "journal-write":
			want = errorfs.OpWrite
		default:
			return errorfs.Fault{}, false
		}
		if op != want {
			return errorfs.Fault{}, false
		}
		for _, d := range journalDirs {
			if strings.HasPrefix(path, d) {
				return errorfs.Fault{Err: unix.EIO}, true
			}
		}
		return errorfs.Fault{}, false
	})
	log.Warn("test fault injection enabled: this bookie's disk fails on demand", "control", control)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			b, _ := os.ReadFile(control)
			f := strings.Fields(string(b))
			next := ""
			if len(f) > 0 {
				next = f[0]
			}
			if prev := mode.Swap(&next); *prev != next {
				log.Warn("test fault injection changed", "from", *prev, "to", next)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return errorfs.Wrap(fs, inj)
}
