// Package chaos is Magnetar's fault suite (make chaos, make chaos-smoke):
// a real cluster of processes (3 ZooKeeper nodes, 4 bookies, 3 brokers,
// the proxy), each in its own network namespace (internal/netlab), runs a
// recorded client workload through named, seeded fault scenarios (kill -9,
// SIGSTOP, partitions, unloads, bundle splits, rolling restarts, random
// mixes). After each run the faults are healed, the workload drains, and
// Check proves nothing acknowledged was lost, reordered, duplicated (where
// deduplication is on) or invented; the report goes to docs/chaos/REPORT.md.
//
// Files: netlab hosts and processes (cluster.go, proc.go), the workload
// process (workload.go), the checker (check.go), one run (run.go), the
// scenarios (scenarios.go), the report (report.go); chaos_test.go is the
// entry point, TestChaos, which the Makefile runs with -chaos.* flags.
package chaos
