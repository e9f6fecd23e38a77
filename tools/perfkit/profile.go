package perfkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// StartProfile writes a CPU profile of everything until the returned stop
// is called, which also writes an allocation profile, into dir (created
// if missing) as cpu.pprof and allocs.pprof. Read them with go tool pprof.
func StartProfile(dir string) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return nil, errors.Join(fmt.Errorf("profile: %w", err), cpu.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		err := cpu.Close()
		allocs, cerr := os.Create(filepath.Join(dir, "allocs.pprof"))
		if cerr != nil {
			return errors.Join(err, fmt.Errorf("profile: %w", cerr))
		}
		err = errors.Join(err, pprof.Lookup("allocs").WriteTo(allocs, 0), allocs.Close())
		if err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		return nil
	}, nil
}
