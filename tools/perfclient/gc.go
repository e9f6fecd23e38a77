package perfclient

import (
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// LoadGeneratorGCPercent is the GOGC of the load generators (magnetar
// perf's clients and natsperf, so both systems' clients cost the shared
// cores alike). A load generator's live heap is small (the messages in
// flight) and its allocation rate high (a payload and the client's batch
// copies per message), so at Go's default of 100 it collected several
// times a second and scanned every goroutine's stack each time: 20-25% of
// a client's CPU, taken from the server under test on a shared machine.
// At 400 (measured, 4 clients of 2 producers on 2 cores): plain 182K ->
// 202K msg/s, 100-message transactions 116K -> 127K.
const LoadGeneratorGCPercent = 400

// SetLoadGeneratorGC sets LoadGeneratorGCPercent unless GOGC is set.
func SetLoadGeneratorGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(LoadGeneratorGCPercent)
	}
}

// LoadGeneratorGODEBUG is the runtime setting the load generators run
// with unless GODEBUG already sets it: freed heap pages are handed back to
// the kernel with MADV_FREE instead of MADV_DONTNEED, so that pages the
// collector frees and the client allocates again right away are not
// faulted in anew (first touch is dear on this VM). Measured on `magnetar
// perf e2e` at 40,000 msg/s, in-memory standalone, 4 alternated pairs:
// minor faults 33,000-38,000 -> 14,000-19,000 per run, publish p99 4.75 /
// 4.28 / 3.34 / 4.56 -> 4.51 / 3.44 / 3.15 / 3.96 ms. Not for servers:
// pages freed that way stay in the RSS until the kernel wants them, and
// the servers' memory is what operators (and the report's targets) read.
const LoadGeneratorGODEBUG = "madvdontneed=0"

// LoadGeneratorEnv returns env with LoadGeneratorGODEBUG added to GODEBUG,
// and whether it changed anything (false when GODEBUG already sets
// madvdontneed, the operator's choice, or the process runs with it).
func LoadGeneratorEnv(env []string) ([]string, bool) {
	key, _, _ := strings.Cut(LoadGeneratorGODEBUG, "=")
	for i, kv := range env {
		cur, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		for _, setting := range strings.Split(cur, ",") {
			if name, _, _ := strings.Cut(setting, "="); name == key {
				return env, false
			}
		}
		out := slices.Clone(env)
		if cur == "" {
			out[i] = "GODEBUG=" + LoadGeneratorGODEBUG
		} else {
			out[i] = "GODEBUG=" + cur + "," + LoadGeneratorGODEBUG
		}
		return out, true
	}
	return append(slices.Clone(env), "GODEBUG="+LoadGeneratorGODEBUG), true
}

// ExecAsLoadGenerator re-executes this program with LoadGeneratorEnv, as
// the runtime reads the setting only at start. It returns only when no
// re-execution was needed, or it failed (the run then goes on with the
// runtime's default; the error says why).
func ExecAsLoadGenerator() error {
	env, changed := LoadGeneratorEnv(os.Environ())
	if !changed {
		return nil
	}
	if err := unix.Exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("re-executing with GODEBUG=%s: %w", LoadGeneratorGODEBUG, err)
	}
	return nil
}
