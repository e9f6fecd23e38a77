package perfclient

import (
	"os"
	"runtime/debug"
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
