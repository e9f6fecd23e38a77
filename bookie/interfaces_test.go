package bookie_test

import (
	"github.com/magnetar-io/magnetar/bookie"
	"github.com/magnetar-io/magnetar/ledger"
)

// The ledger client depends on no bookie server code: it states what it
// needs from a bookie as interfaces, and these assertions keep the bookie
// and the client agreeing on them.
var (
	_ ledger.LocalBookie  = (*bookie.Core)(nil) // ledger.LocalTransport serves in-process bookies
	_ bookie.LedgerOracle = (*ledger.Client)(nil)
)
