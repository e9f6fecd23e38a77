// Package invariants holds checks of what comments in the code state as
// invariants (as pebble's internal/invariants does). They run only in
// builds with the invariants tag (make test sets it): without it Enabled
// is a false constant, and a check written
//
//	if invariants.Enabled && c.unacked < 0 {
//		invariants.Failf("consumer %d: unacked %d", c.id, c.unacked)
//	}
//
// compiles away. A failed check panics: it names a bug, never a
// condition to handle.
package invariants

import "fmt"

// Failf panics with the broken invariant. Call it only under Enabled.
func Failf(format string, args ...any) {
	panic(fmt.Sprintf("invariant violated: "+format, args...))
}

// Check panics with the message if cond is false, in invariants builds;
// otherwise it does nothing (its arguments are still evaluated: guard
// costly ones with Enabled).
func Check(cond bool, format string, args ...any) {
	if Enabled && !cond {
		Failf(format, args...)
	}
}
