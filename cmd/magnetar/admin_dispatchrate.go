package main

// magnetar admin namespaces set-replicator-dispatch-rate,
// get-replicator-dispatch-rate and remove-replicator-dispatch-rate, as
// pulsar-admin's: the most each of the namespace's replicators in the
// cluster of the broker asked sends every period (docs/geo-replication.md).
// -1 (the default of each flag) is no limit on it; unset prints
// "(not set)" (text) or null (json), and the broker's
// dispatchThrottlingRatePerReplicatorIn* apply.

import (
	"flag"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/magnetar-io/magnetar/broker/resources"
)

func dispatchRateCmds() []adminCmd {
	return []adminCmd{
		nsCmd("set-replicator-dispatch-rate", "limit what each replicator of the namespace sends", func(fs *flag.FlagSet) nsAction {
			msgs := fs.Int("msg-dispatch-rate", -1, "messages (entries: a batch is one) per period; -1 no limit")
			bytes := fs.Int64("byte-dispatch-rate", -1, "bytes per period; -1 no limit")
			period := fs.Int("dispatch-rate-period", 1, "the period in seconds")
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				if *period < 1 {
					return replyNone(), usageErrorf("--dispatch-rate-period %d: want 1 or more seconds", *period)
				}
				return replyNone(), env.api.Namespaces().SetReplicatorDispatchRate(*ns, utils.DispatchRate{
					DispatchThrottlingRateInMsg: *msgs, DispatchThrottlingRateInByte: *bytes, RatePeriodInSecond: *period})
			}
		}),
		nsPlain("get-replicator-dispatch-rate", "show the namespace's replicator dispatch rate", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			// Raw: pulsaradmin answers a zero rate, not "not set", for 204.
			var r *resources.DispatchRate
			err := env.raw.Get(nsPath(ns, "replicatorDispatchRate"), &r)
			return replyObject(r), err
		}),
		nsPlain("remove-replicator-dispatch-rate", "remove the namespace's replicator dispatch rate (the broker's defaults apply)", func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
			return replyNone(), env.raw.Delete(nsPath(ns, "replicatorDispatchRate"))
		}),
	}
}
