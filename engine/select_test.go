package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSelectFallsBackAndLogs(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	noUring := func() (FS, error) { return nil, wrapErr("uring", "setup", "io_uring", unix.ENOSYS) }

	fs, err := newWith(Options{Backend: BackendAuto, Logger: log}, noUring)
	if err != nil || fs.Backend() != "std" {
		t.Fatalf("auto without io_uring: fs=%v err=%v", fs, err)
	}
	if !strings.Contains(logs.String(), "backend=std") || !strings.Contains(logs.String(), "function not implemented") {
		t.Fatalf("fallback not logged with its reason: %s", logs.String())
	}
	if _, err := newWith(Options{Backend: BackendUring, Logger: log}, noUring); !errors.Is(err, unix.ENOSYS) {
		t.Fatalf("explicit uring without io_uring: %v", err)
	}
	if _, err := newWith(Options{Backend: "spdk", Logger: log}, noUring); err == nil ||
		!strings.Contains(err.Error(), `unknown io backend "spdk"`) {
		t.Fatalf("unknown backend: %v", err)
	}
	for _, name := range []string{BackendStd, BackendMem} {
		fs, err := newWith(Options{Backend: name, Logger: log}, noUring)
		if err != nil || fs.Backend() != name {
			t.Fatalf("%s: %v %v", name, fs, err)
		}
	}
}

func TestSelectAutoPicksUring(t *testing.T) {
	fs, err := New(Options{Backend: BackendAuto, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if fs.Backend() != "uring" {
		t.Fatalf("auto picked %s on a kernel with io_uring", fs.Backend())
	}
}
