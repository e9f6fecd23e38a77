package managedledger

import (
	"fmt"
	"strings"
)

// Names. A managed ledger stored in ledgers has a metadata node at
// ManagedLedgersPath/tenant/namespace/persistent/local, and its cursors
// are the node's children (escaped as one segment each: cursorPath). The
// layout has a fixed depth, so a node's depth says what it is: a name
// with more segments would be read as a cursor of the topic above it (and
// a new owner of that topic would rewrite its ledger list from it), one
// with fewer would take a namespace's directory for a ledger. The broker
// escapes a topic's local name into one segment (TopicName.ManagedLedgerName);
// the factory checks every name at the layer boundary, so no other caller
// (a tool, the replicator, a system topic) can get it wrong silently.
//
// Legacy (v1) topics, persistent://property/cluster/namespace/local, are
// stored as Pulsar stores them, one level deeper:
// property/cluster/namespace/persistent/local. Depth still says what a
// node is as long as the v1 namespace is not itself named "persistent"
// (then p/c/persistent/persistent/l would be a cursor of the v2 topic
// p/c/persistent/persistent): such names are refused here, as the broker
// refuses them.

// validName returns an error wrapping ErrInvalidName unless name is
// tenant/namespace/persistent/local or, for v1 topics,
// property/cluster/namespace/persistent/local, with no empty, "." or ".."
// segment.
func validName(name string) error {
	segs := strings.Split(name, "/")
	v2 := len(segs) == 4 && segs[2] == "persistent"
	v1 := len(segs) == 5 && segs[3] == "persistent" && segs[2] != "persistent" && segs[2] != "non-persistent"
	if !v1 && !v2 {
		return fmt.Errorf("managedledger: name %q: want tenant/namespace/persistent/local or "+
			"property/cluster/namespace/persistent/local (local escaped as one segment): %w", name, ErrInvalidName)
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("managedledger: name %q: empty, . or .. segment: %w", name, ErrInvalidName)
		}
	}
	return nil
}
