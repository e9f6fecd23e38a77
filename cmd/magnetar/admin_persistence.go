package main

// magnetar admin namespaces set-persistence, get-persistence,
// remove-persistence and set-bookie-affinity-group,
// get-bookie-affinity-group, delete-bookie-affinity-group, as
// pulsar-admin's: a namespace's ledger replication (ensemble, write and
// ack quorums, the cursors' mark-delete rate) and the groups of the bookie
// rack map its ledgers are placed on. Unset values print "(not set)"
// (text) or null (json).

import (
	"flag"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

func persistenceCmds() []adminCmd {
	return []adminCmd{
		nsCmd("set-persistence", "set the ledger replication of the namespace's topics", func(fs *flag.FlagSet) nsAction {
			e := fs.Int("bookkeeper-ensemble", 0, "bookies each ledger is spread over (E; required)")
			qw := fs.Int("bookkeeper-write-quorum", 0, "copies of each entry (Qw; required)")
			qa := fs.Int("bookkeeper-ack-quorum", 0, "copies acknowledged before a publish is (Qa; required)")
			rate := fs.Float64("ml-mark-delete-max-rate", 0, "cursor position writes a second at most (0: the broker's default)")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *e <= 0 || *qw <= 0 || *qa <= 0 {
					return replyNone(), usageErrorf("--bookkeeper-ensemble, --bookkeeper-write-quorum and --bookkeeper-ack-quorum are required")
				}
				return replyNone(), env.api.Namespaces().SetPersistence(ns.String(), utils.NewPersistencePolicies(*e, *qw, *qa, *rate))
			}
		}),
		nsPlain("get-persistence", "show the ledger replication of the namespace's topics", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			p, err := env.api.Namespaces().GetPersistence(ns.String())
			return replyObject(p), err
		}),
		nsPlain("remove-persistence", "remove the namespace's ledger replication (the broker's defaults apply)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			return replyNone(), env.api.Namespaces().RemovePersistence(ns.String())
		}),
		nsCmd("set-bookie-affinity-group", "place the namespace's ledgers on the bookies of rack-map groups", func(fs *flag.FlagSet) nsAction {
			primary := fs.String("primary-group", "", "group whose bookies are used first (required)")
			secondary := fs.String("secondary-group", "", "group used when the primary has too few bookies")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *primary == "" {
					return replyNone(), usageErrorf("--primary-group is required")
				}
				return replyNone(), env.api.Namespaces().SetBookieAffinityGroup(ns.String(),
					utils.BookieAffinityGroupData{BookkeeperAffinityGroupPrimary: *primary, BookkeeperAffinityGroupSecondary: *secondary})
			}
		}),
		nsPlain("get-bookie-affinity-group", "show the namespace's bookie affinity groups", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			g, err := env.api.Namespaces().GetBookieAffinityGroup(ns.String())
			return replyObject(g), err
		}),
		nsPlain("delete-bookie-affinity-group", "remove the namespace's bookie affinity groups", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			return replyNone(), env.api.Namespaces().DeleteBookieAffinityGroup(ns.String())
		}),
	}
}
