package main

// magnetar admin namespaces set-replicator-dispatch-rate,
// get-replicator-dispatch-rate and remove-replicator-dispatch-rate, as
// pulsar-admin's: the most each of the namespace's replicators in the
// cluster of the broker asked sends every period (docs/geo-replication.md).
// The same three under topics set the rate of one topic's replicators,
// over its namespace's: in the cluster of the broker asked, as Pulsar's
// topic policies, or with --global in every cluster without its own;
// get-replicator-dispatch-rate --applied shows the one in force.
// -1 (the default of each flag) is no limit on it; unset prints
// "(not set)" (text) or null (json), and the broker's
// dispatchThrottlingRatePerReplicatorIn* apply.

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// dispatchRateFlags registers pulsar-admin's dispatch rate flags; the
// function it returns reads them, or fails on a period under a second.
func dispatchRateFlags(fs *flag.FlagSet) func() (resources.DispatchRate, error) {
	msgs := fs.Int("msg-dispatch-rate", -1, "messages (entries: a batch is one) per period; -1 no limit")
	bytes := fs.Int64("byte-dispatch-rate", -1, "bytes per period; -1 no limit")
	period := fs.Int("dispatch-rate-period", 1, "the period in seconds")
	relative := fs.Bool("relative-to-publish-rate", false, "add the topic's publish rate to each limit")
	return func() (resources.DispatchRate, error) {
		if *period < 1 {
			return resources.DispatchRate{}, usageErrorf("--dispatch-rate-period %d: want 1 or more seconds", *period)
		}
		return resources.DispatchRate{DispatchThrottlingRateInMsg: *msgs, DispatchThrottlingRateInByte: *bytes,
			RatePeriodInSecond: *period, RelativeToPublishRate: *relative}, nil
	}
}

func dispatchRateCmds() []adminCmd {
	return []adminCmd{
		nsCmd("set-replicator-dispatch-rate", "limit what each replicator of the namespace sends", func(fs *flag.FlagSet) nsAction {
			rate := dispatchRateFlags(fs)
			return func(env *adminEnv, ns *utils.NameSpaceName) (adminReply, error) {
				r, err := rate()
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.raw.Post(nsPath(ns, "replicatorDispatchRate"), r)
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

// globalFlag is pulsar-admin's --global of topic policies: the policy
// for every cluster rather than the one of the broker asked.
func globalFlag(fs *flag.FlagSet) func() map[string]string {
	global := fs.Bool("global", false, "the topic's rate for every cluster without its own (isGlobal)")
	return func() map[string]string { return map[string]string{"isGlobal": fmt.Sprint(*global)} }
}

func topicDispatchRateCmds() []adminCmd {
	return []adminCmd{
		topicCmd("set-replicator-dispatch-rate", "limit what each replicator of the topic sends (over its namespace's)", func(fs *flag.FlagSet) topicAction {
			rate, scope := dispatchRateFlags(fs), globalFlag(fs)
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				r, err := rate()
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.raw.PostWithQueryParams(topicPath(t, "replicatorDispatchRate"), r, scope())
			}
		}),
		topicCmd("get-replicator-dispatch-rate", "show the topic's replicator dispatch rate", func(fs *flag.FlagSet) topicAction {
			applied := fs.Bool("applied", false, "the rate in force: the topic's, else its namespace's, else the broker's")
			scope := globalFlag(fs)
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				params := scope()
				params["applied"] = fmt.Sprint(*applied)
				body, err := env.raw.GetWithQueryParams(topicPath(t, "replicatorDispatchRate"), nil, params, false)
				var r *resources.DispatchRate
				if err == nil && len(body) > 0 {
					err = json.Unmarshal(body, &r)
				}
				return replyObject(r), err
			}
		}),
		topicCmd("remove-replicator-dispatch-rate", "remove the topic's replicator dispatch rate (its namespace's applies)", func(fs *flag.FlagSet) topicAction {
			scope := globalFlag(fs)
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				return replyNone(), env.raw.DeleteWithQueryParams(topicPath(t, "replicatorDispatchRate"), scope())
			}
		}),
	}
}
