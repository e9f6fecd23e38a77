//go:build !invariants

package invariants

// Enabled: this build checks invariants (the invariants build tag).
const Enabled = false
