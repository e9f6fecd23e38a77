// Package proccpu reads this process's CPU time, for the broker's load
// reports and the load generators' own CPU figure.
package proccpu

import (
	"syscall"
	"time"
)

// Used is the user + system time of every thread of this process so far.
func Used() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
