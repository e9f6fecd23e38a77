package main

import (
	"log/slog"
	"os"
	"runtime"
)

// spareProcs is how many Ps (Go's processors) a server runs beyond the
// runtime's default of one per CPU it may use.
//
// Why: the network event loops (gnet) wait in epoll_wait and the journals
// in io_uring_enter, system calls that keep their P until the runtime's
// monitor takes it back, which can take ~20 ms when it has been idle. A
// goroutine readied just before (the in-process bookie call, the ledger's
// delivery, a reaped journal completion) waits that long when no other P
// is free to steal it. One spare P is almost always free: with it the
// median wait of those goroutines fell from 2.5 ms to 0.3 ms at 10,000
// topics, and the publish p99 at 60,000 msg/s with storage on tmpfs from
// 13-17 ms to 9-11 ms, with no loss of maximum throughput (TUNING.md).
const spareProcs = 1

// serverProcs is the P count a server should run with: the default plus
// spareProcs, unless the operator set GOMAXPROCS (then set is false).
func serverProcs(env string, defaultProcs int) (n int, set bool) {
	if env != "" {
		return defaultProcs, false
	}
	return defaultProcs + spareProcs, true
}

// setServerProcs applies serverProcs to this process. It starts from the
// runtime's default (CPUs and cgroup limit), so a process that starts
// servers more than once (tests) adds the spare once.
func setServerProcs(log *slog.Logger) {
	env := os.Getenv("GOMAXPROCS")
	if env == "" {
		runtime.SetDefaultGOMAXPROCS()
	}
	n, set := serverProcs(env, runtime.GOMAXPROCS(0))
	if !set {
		log.Info("processors from GOMAXPROCS", "GOMAXPROCS", n)
		return
	}
	runtime.GOMAXPROCS(n)
	log.Info("processors set: one per CPU plus a spare for goroutines readied beside blocking system calls (GOMAXPROCS overrides)",
		"gomaxprocs", n)
}
